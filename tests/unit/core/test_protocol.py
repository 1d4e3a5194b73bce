"""The chain's protocol (``chain.core.protocol``): one test per row of the
transition table (what each event changes and which effects it asks for),
purity; the docs' table is the code's. The executor that carries the effects
out: effects/test_executor.py."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from _chains import running_status as _running

from chain.core import events as ev
from chain.core import protocol as p
from chain.core.model import ChainState
from chain.errors import ProtocolError
from chain.store import ChainStatus

ROOT = Path(__file__).resolve().parents[3]


def _changed(before: ChainStatus, after: ChainStatus) -> dict[str, Any]:
    return {f.name: getattr(after, f.name) for f in fields(before) if getattr(after, f.name) != getattr(before, f.name)}


S = ev.Save()
ROWS: list[tuple[ev.Event, ChainStatus, dict[str, Any], tuple[ev.Effect, ...]]] = [
    (ev.Prepared("slurm", "/w"), _running(), {"backend": "slurm", "workdir": "/w"}, (S,)),
    (
        ev.Resumed(),
        _running(),
        {"submitter_cycle": 3, "state": ChainState.PENDING, "no_progress": 0, "retries_used": 0},
        (),
    ),
    (
        ev.Resumed(),
        _running(state=ChainState.FAILED, reason="app exited 3", end_announced=True),
        {
            "submitter_cycle": 3,
            "state": ChainState.PENDING,
            "reason": "",
            "no_progress": 0,
            "retries_used": 0,
            "hooks": [],
            "end_announced": False,
        },
        (),
    ),
    (
        ev.RelayStarted(),
        _running(relay_broken="x"),
        {"submitter_job_id": "", "relay_broken": "", "submitter_cycle": 0},
        (),
    ),
    (ev.SubmitterQueued("51"), _running(), {"submitter_job_id": "51"}, (S, ev.RecordSubmitter("51"))),
    (
        ev.SubmitterStarted("51"),
        _running(state=ChainState.PENDING),
        {"state": ChainState.RUNNING, "submitter_job_id": "51"},
        (S,),
    ),
    (ev.HandingOver(), _running(), {"submitter_cycle": 3}, (S,)),
    (ev.CounterRead(42), _running(), {"iteration": 42}, ()),
    (
        ev.RunnerIntended(30, 1000.0),
        _running(runner_live=False),
        {"runner_seq": 4, "runner_job_id": "", "runner_live": True, "iter_before": 30, "runner_submitted": 1000.0},
        (S,),
    ),
    (
        ev.RunnerSubmitted("105", 500),
        _running(runner_job_id=""),
        {"runner_job_id": "105"},
        (S, ev.RecordWorker("105"), ev.Log("submitted runner 3: job 105 (counter 20/500)")),
    ),
    (ev.RunnerFound("105"), _running(runner_job_id=""), {"runner_job_id": "105"}, (S, ev.RecordWorker("105"))),
    (ev.RunnerLost(), _running(runner_job_id=""), {"runner_live": False, "runner_seq": 2}, ()),
    (
        ev.SuccessorQueued("106", "queued"),
        _running(next_job_id="", relay_broken="x"),
        {"next_job_id": "106", "relay_broken": ""},
        (S, ev.Log("queued")),
    ),
    (ev.SuccessorQueued("106"), _running(next_job_id=""), {"next_job_id": "106"}, (S,)),
    (ev.SuccessorTaken(), _running(), {"next_job_id": ""}, ()),
    (ev.SuccessorForgotten(), _running(), {"next_job_id": ""}, (S,)),
    (ev.SuccessorDropped(), _running(), {"next_job_id": ""}, (S, ev.Cancel("104"))),
    (ev.SuccessorDropped(), _running(next_job_id=""), {}, ()),
    (
        ev.RelayBroken("could not queue runner 4: down"),
        _running(next_job_id=""),
        {"relay_broken": "could not queue runner 4: down"},
        (
            S,
            ev.Log(
                "relay: could not queue runner 4: down; the app runs, then the chain stalls (chain submit --resume)"
            ),
        ),
    ),
    (ev.RelayTookOver("103", 3), _running(state=ChainState.PENDING), {"state": ChainState.RUNNING}, (S,)),
    (ev.Judged(30, 0, 1, job_id="103"), _running(), {"runner_live": False, "iteration": 30, "no_progress": 0}, (S,)),
    (
        ev.Judged(30, 0, 1, job_id="103", margin=(40, 12.5, 3.0), reason="margin does not fit: x"),
        _running(),
        {
            "runner_live": False,
            "iteration": 30,
            "no_progress": 0,
            "margin": 40,
            "worst_stop_to_exit": 12.5,
            "worst_startup": 3.0,
            "reason": "margin does not fit: x",
        },
        (S,),
    ),
    (
        ev.CancelledUnjudged(),
        _running(),
        {"runner_live": False, "next_job_id": ""},
        (ev.Log("cancelled the queued runner job 104", echo=False),),
    ),
    (
        ev.HookRan({"name": "plot", "rc": 0}),
        _running(),
        {"hooks": [{"name": "report", "rc": 0}, {"name": "plot", "rc": 0}]},
        (S,),
    ),
    (ev.Announced(), _running(), {"end_announced": True}, (S,)),
    (ev.Ending(), _running(), {"runner_live": False, "next_job_id": ""}, (S, ev.Cancel("104"))),
    (ev.Ending(), _running(next_job_id=""), {"runner_live": False}, ()),
    (
        ev.Ended(ChainState.COMPLETED, "reached MAX_ITER=500", completed_at=9.0),
        _running(),
        {"state": ChainState.COMPLETED, "reason": "reached MAX_ITER=500", "runner_live": False, "completed_at": 9.0},
        (S,),
    ),
    (
        ev.Ended(ChainState.FAILED, "app exited 3"),
        _running(),
        {"state": ChainState.FAILED, "reason": "app exited 3", "runner_live": False},
        (S,),
    ),
]


@pytest.mark.parametrize(
    ("event", "before", "changes", "effects"), ROWS, ids=[f"{type(r[0]).__name__}-{i}" for i, r in enumerate(ROWS)]
)
def test_each_row_changes_what_it_says_and_asks_for_its_effects(
    event: ev.Event, before: ChainStatus, changes: dict[str, Any], effects: tuple[ev.Effect, ...]
) -> None:
    snapshot = replace(before, hooks=list(before.hooks))
    after, asked = p.transition(before, event)
    assert _changed(before, after) == changes
    assert asked == effects
    assert before == snapshot  # pure: the status given is not changed


def test_every_event_of_the_table_has_a_row_here() -> None:
    assert {type(r[0]).__name__ for r in ROWS} == {name for name, _, _ in p.protocol_table()}


def test_something_that_is_not_an_event_is_refused() -> None:
    with pytest.raises(TypeError, match="not a protocol event"):
        p.transition(_running(), "submitted")  # type: ignore[arg-type]


def test_the_docs_table_is_the_codes() -> None:
    text = (ROOT / "docs" / "how-it-works.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([a-z, ()]+) \| (.+?) \|$", text, flags=re.MULTILINE)
    assert rows == p.protocol_table()


# The events a chain that has ended still takes: a resume, the clean-up of a
# runner it left queued, and the announcement and record of its end. Every
# other event is for a chain that is pending or running.
AFTER_THE_END = {"Resumed", "SuccessorDropped", "CancelledUnjudged", "Announced", "Ended"}
EXAMPLE = {type(r[0]): r[0] for r in reversed(ROWS)}  # one event of each kind, from its first row


@pytest.mark.parametrize("state", list(ChainState), ids=[s.value for s in ChainState])
@pytest.mark.parametrize("kind", list(EXAMPLE), ids=[k.__name__ for k in EXAMPLE])
def test_every_state_and_event_pair_is_applied_or_refused_as_the_table_says(kind: type, state: ChainState) -> None:
    legal = state in (ChainState.PENDING, ChainState.RUNNING) or kind.__name__ in AFTER_THE_END
    assert (state in p.legal_states(kind)) == legal
    before = _running(state=state)
    snapshot = replace(before, hooks=list(before.hooks))
    if (kind, state) == (ev.Ended, ChainState.CANCELLED):  # legal, and guarded: only a cancel ends it again
        with pytest.raises(ProtocolError, match="Ended refused: the chain was cancelled"):
            p.transition(before, EXAMPLE[kind])
        assert p.transition(before, ev.Ended(ChainState.CANCELLED, "again"))[0].reason == "again"
    elif legal:
        after, _ = p.transition(before, EXAMPLE[kind])
        assert after is not before
    else:
        with pytest.raises(ProtocolError) as refused:
            p.transition(before, EXAMPLE[kind])
        assert str(refused.value) == f"chain demo-abc123: {kind.__name__} refused: the chain is {state.value}"
        assert refused.value.event == kind.__name__
    assert before == snapshot


@pytest.mark.parametrize(
    ("status", "job_id", "seq", "current"),
    [
        (_running(), "103", 3, True),
        (_running(), "103", None, True),  # a job whose name has no number: its id decides
        (_running(runner_job_id=""), "103", 3, True),  # intended, sbatch had not returned: its number decides
        (_running(), "104", 4, False),  # the queued next one
        (_running(), "99", 3, False),  # a copy of another job with the same number
        (_running(), "103", 2, False),
        (_running(runner_live=False), "103", 3, False),  # judged already
        (_running(state=ChainState.CANCELLED), "103", 3, False),
    ],
)
def test_the_one_current_runner_rule(status: ChainStatus, job_id: str, seq: int | None, current: bool) -> None:
    assert p.is_current_runner(status, job_id, seq) is current


def test_a_relay_runner_that_is_not_the_current_one_cannot_take_over() -> None:
    with pytest.raises(ProtocolError, match="RelayTookOver refused: job 99 is not the chain's current runner"):
        p.transition(_running(state=ChainState.PENDING), ev.RelayTookOver("99", 3))


def test_a_reason_carries_its_kind_and_a_resume_clears_both() -> None:
    from chain.core.reasons import ReasonKind

    warned, _ = p.transition(
        _running(),
        ev.Judged(21, 0, 0, job_id="103", reason="margin does not fit: x", reason_kind=ReasonKind.MARGIN_WARNING),
    )
    assert warned.reason_kind is ReasonKind.MARGIN_WARNING
    again = replace(warned, runner_live=True)  # the next runner (the same job id: this test's shortcut)
    fits, _ = p.transition(again, ev.Judged(22, 0, 0, job_id="103", reason=""))  # they fit again: reason, kind go
    assert (fits.reason, fits.reason_kind) == ("", None)
    kept, _ = p.transition(again, ev.Judged(22, 0, 0, job_id="103"))  # no word on the reason: both stay
    assert kept.reason_kind is ReasonKind.MARGIN_WARNING
    ended, _ = p.transition(warned, ev.Ended(ChainState.STOPPED, "no progress: x", kind=ReasonKind.NO_PROGRESS))
    assert ended.reason_kind is ReasonKind.NO_PROGRESS
    resumed, _ = p.transition(ended, ev.Resumed())
    assert (resumed.reason, resumed.reason_kind) == ("", None)


def test_a_judgment_of_a_runner_that_is_not_the_live_current_one_is_refused() -> None:
    """A judgment made on an older view and applied again over a newer state.json (the executor's
    rebase) must judge neither another runner nor one twice."""
    with pytest.raises(ProtocolError, match="Judged refused: job 102 is not the chain's current runner"):
        p.transition(_running(), ev.Judged(30, 0, 1, job_id="102"))
    judged, _ = p.transition(_running(), ev.Judged(30, 0, 1, job_id="103"))
    with pytest.raises(ProtocolError, match="Judged refused: runner job 103 was judged already"):
        p.transition(judged, ev.Judged(31, 0, 1, job_id="103"))
