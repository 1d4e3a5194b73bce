"""``state.json``'s record (``chain.core.status.ChainStatus``): every field
checked against its type as it is read, a newer format and a hostile id
refused, the one rule of the runner queued next."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.core.model import ChainState
from chain.core.status import ChainStatus
from chain.errors import ChainDirError

OK = {"chain_id": "c-1", "state": "running"}


@pytest.mark.parametrize(
    "field, value",
    [
        ("runner_seq", None),
        ("runner_seq", "3"),
        ("runner_seq", True),
        ("margin", 1.5),
        ("worst_stop_to_exit", float("nan")),
        ("runner_live", 1),
        ("hooks", [1, 2]),
        ("hooks", {"a": 1}),
        ("submitter_job_id", 41),
        ("state", "exploded"),
    ],
)
def test_every_field_is_checked_against_its_type(field: str, value: object) -> None:
    """Optional and container fields too (``int | None`` used to escape)."""
    with pytest.raises(ChainDirError, match=f"is corrupt: bad {field}"):
        ChainStatus.from_json({**OK, field: value}, Path("state.json"))


def test_a_status_round_trips_and_ignores_unknown_keys() -> None:
    status = ChainStatus(
        chain_id="c-1",
        state=ChainState.STOPPED,
        runner_seq=4,
        margin=13,
        worst_stop_to_exit=3.75,
        hooks=[{"name": "report", "rc": 0}],
    )
    data = json.loads(json.dumps({**status.to_json(), "from_a_newer_writer": 1}))
    assert ChainStatus.from_json(data, Path("s")) == status


def test_a_newer_state_format_is_refused() -> None:
    with pytest.raises(ChainDirError, match="newer than this chain understands"):
        ChainStatus.from_json({**OK, "version": 99}, Path("state.json"))
    with pytest.raises(ChainDirError, match="no chain_id"):
        ChainStatus.from_json({**OK, "chain_id": ""}, Path("state.json"))
    for hostile in ("a/b", "../x", "..", ".", "a b", "a\u2028b"):  # a path, or out of its line
        with pytest.raises(ChainDirError, match="bad chain_id"):
            ChainStatus.from_json({**OK, "chain_id": hostile}, Path("state.json"))
    assert ChainStatus.from_json({**OK, "chain_id": "run.1-0a1b2c"}, Path("state.json")).chain_id == "run.1-0a1b2c"


@pytest.mark.parametrize(
    ("next_job", "job", "seq", "expected"),
    [
        ("102", "102", 2, True),  # the runner queued behind runner 1
        ("102", "102", 3, False),  # a job of that id from another cycle
        ("102", "103", 2, False),  # a stale pre-queued runner
        ("", "", 2, False),  # nothing queued
        ("102", "102", None, False),  # a job whose name carries no runner number
    ],
)
def test_the_queued_next_runner_is_named_by_id_and_number(
    next_job: str, job: str, seq: int | None, expected: bool
) -> None:
    status = ChainStatus(chain_id="c", runner_seq=1, runner_job_id="101", next_job_id=next_job)
    assert status.queued_next(job, seq) is expected


def test_the_jobs_a_record_names_include_a_judged_runner_that_may_still_be_leaving() -> None:
    ended = ChainStatus(chain_id="c-1", state=ChainState.COMPLETED, submitter_job_id="7", runner_job_id="8")
    assert ended.live_jobs() == ["7"] and ended.named_jobs() == ["7", "8"]
    relay = ChainStatus(chain_id="c-1", runner_job_id="8", runner_live=True, next_job_id="9")
    assert relay.named_jobs() == ["8", "9"]
    assert ChainStatus(chain_id="c-1").named_jobs() == []
