"""Lookahead (``chain.effects.runners``): a runner pre-queued by lookahead must never outlive its chain: chain
cancel and every way the submitter stops cancel it, a resume cancels a stale
one, and a stale one that starts anyway exits without running the app (found
in review: chain submit --lookahead queues runner 2 at once)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from chain import api
from chain.backends.base import JobState
from chain.core.model import ChainState
from chain.core.reasons import ReasonKind
from chain.errors import ChainDirError
from chain.jobs import runner
from chain.jobs.submitter import Submitter
from chain.modes.common import refuse_live_submitter
from chain.store import ChainDir, ChainStatus


@pytest.fixture
def fake() -> FakeBackend:
    return FakeBackend()


def _submit(tmp_path: Path, fake: FakeBackend, **flags: Any) -> ChainDir:
    api.submit(
        {"app_cmd": "true", "max_iter": 10, "lookahead": True, **flags},
        {},
        config=None,
        chain_dir=tmp_path / ".chain",
        workdir=tmp_path,
        backend=fake,
    )
    return ChainDir(tmp_path / ".chain")


def test_submit_with_lookahead_queues_runner_2_behind_runner_1(tmp_path: Path, fake: FakeBackend) -> None:
    """On a busy cluster the submitter job may start after runner 1 ended:
    chain submit queues runner 2 itself, so the first handoff overlaps too."""
    chain = _submit(tmp_path, fake)
    status = chain.load_status()
    assert status is not None
    assert [d for _, d in fake.submitted] == [None, "afterany:101", None]
    assert [n.rsplit(".", 1)[1] for n, _ in fake.submitted] == ["r1", "r2", "s0"]
    assert status.runner_job_id == "101" and status.next_job_id == "102" and status.runner_seq == 1

    fake.submitted.clear()
    api.submit(
        {"app_cmd": "true", "max_iter": 10},
        {},
        config=None,
        chain_dir=tmp_path / "plain",
        workdir=tmp_path,
        backend=fake,
    )
    assert [d for _, d in fake.submitted] == [None, None]  # no lookahead: runner 1 and the submitter only


def test_chain_cancel_cancels_the_prequeued_runner(tmp_path: Path, fake: FakeBackend) -> None:
    chain = _submit(tmp_path, fake)  # r1 = 101, r2 = 102 behind it, s0 = 103
    api.cancel(tmp_path / ".chain", wait=0, backend=fake)
    assert sorted(fake.cancelled) == ["101", "102", "103"]
    status = chain.load_status()
    assert status is not None and status.state is ChainState.CANCELLED and status.next_job_id == ""


def test_resume_cancels_a_stale_prequeued_runner(tmp_path: Path, fake: FakeBackend) -> None:
    chain = _submit(tmp_path, fake)
    status = chain.load_status()
    assert status is not None
    # the submitter died after judging runner 1 and before dropping runner 2
    status.state, status.runner_live, status.next_job_id = ChainState.STOPPED, False, "102"
    chain.save_status(status)
    fake.set_state("103", JobState.COMPLETED)  # that submitter is gone
    api.submit({}, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, resume=True, backend=fake)
    assert "102" in fake.cancelled
    resumed = chain.load_status()
    assert resumed is not None and resumed.next_job_id == "105"  # the new runner's own pre-queued successor
    assert fake.submitted[-3:] == [
        (f"{resumed.chain_id}.r2", None),
        (f"{resumed.chain_id}.r3", "afterany:104"),
        (f"{resumed.chain_id}.s1", None),
    ]


def test_every_stop_of_the_submitter_drops_the_prequeued_runner(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10, "lookahead": True}, {}, None, tmp_path)
    chain.save_status(
        ChainStatus(chain_id="c-1", workdir=str(tmp_path), runner_seq=1, runner_job_id="7", next_job_id="8")
    )
    backend = FakeBackend()
    sub = Submitter(chain, settings, backend, tmp_path, "5", sleep=lambda s: None)
    status = chain.load_status()
    assert status is not None
    sub.stop_chain(status, ChainState.STOPPED, "checkpoint counter unreadable", ReasonKind.BAD_CHECKPOINT)
    assert backend.cancelled == ["8"]
    saved = chain.load_status()
    assert saved is not None and saved.next_job_id == "" and saved.reason_kind is ReasonKind.BAD_CHECKPOINT


@pytest.mark.parametrize("change", ["ended", "another current runner"])
def test_a_stale_prequeued_runner_never_runs_the_app(tmp_path: Path, change: str) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    marker = tmp_path / "ran"
    settings = api.load_settings({"app_cmd": f"touch {marker}", "max_iter": 10}, {}, None, tmp_path)
    if change == "ended":  # cancelled while job 102 was queued as runner 2
        status = ChainStatus(
            chain_id="c-1",
            workdir=str(tmp_path),
            state=ChainState.CANCELLED,
            runner_seq=1,
            runner_job_id="101",
            next_job_id="102",
        )
    else:  # resumed: runner 2 is now job 104, and 102 is nobody's
        status = ChainStatus(
            chain_id="c-1",
            workdir=str(tmp_path),
            state=ChainState.RUNNING,
            runner_seq=2,
            runner_job_id="104",
            runner_live=True,
            next_job_id="105",
        )
    chain.save_status(status)
    ticks = iter(range(10**6))
    code = runner.run(
        chain,
        settings,
        FakeBackend(),
        job_id="102",
        job_name="c-1.r2",
        workdir=tmp_path,
        clock=lambda: float(next(ticks)),
    )
    assert code == 0 and not marker.exists()
    assert next(ticks) < 20, "it waited out its promotion patience instead of leaving at once"
    record = chain.read_record("102")
    assert record is not None and record["superseded"]


def test_resume_refuses_at_once_while_a_successor_submitter_is_queued(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.set_state("41", JobState.PENDING)
    status = ChainStatus(chain_id="c-1", state=ChainState.STOPPED, submitter_job_id="41", submitter_cycle=2)
    with pytest.raises(ChainDirError, match="submitter job 41 is still queued: scancel it, then resume"):
        refuse_live_submitter(backend, status, wait=120, sleep=lambda s: pytest.fail("it waited"))
