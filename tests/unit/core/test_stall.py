"""The stall watchdog: its rule with an injected clock and probe
(chain.core.stall), the decision on a stalled runner (chain.core.decision),
and the runner stopping a real app that hangs (``--stall-timeout``), while an
app that shows signs of life is left alone."""

from __future__ import annotations

import time
from pathlib import Path

from chain.core.decision import STALLED_REASON, Outcome, Policy, Tally, Verdict, decide
from chain.core.model import ChainState
from chain.core.stall import StallWatch
from unit.jobs.test_runner import _chain, _judge, _run


class Marks:
    """A probe whose answer the test sets."""

    def __init__(self) -> None:
        self.value = 0
        self.looks = 0

    def __call__(self) -> int:
        self.looks += 1
        return self.value


def test_unchanged_marks_for_the_timeout_are_a_stall() -> None:
    marks = Marks()
    watch = StallWatch(30.0, marks)
    assert not watch.stalled(100.0) and watch.quiet_for(100.0) == 0.0  # the first look only notes the marks
    assert not watch.stalled(129.9)
    assert watch.stalled(130.0) and watch.quiet_for(131.0) == 31.0
    assert marks.looks == 3


def test_any_change_starts_the_wait_again() -> None:
    marks = Marks()
    watch = StallWatch(30.0, marks)
    watch.stalled(0.0)
    marks.value = 1
    assert not watch.stalled(29.0)  # changed: quiet since 29
    assert not watch.stalled(58.0)
    assert watch.stalled(59.0)
    marks.value = 0  # back to an earlier value is still a change
    assert not watch.stalled(60.0)


def _outcome(before: int, after: int, stalled: float | None = 600.0) -> Outcome:
    return Outcome(
        exit_code=124 if after > before else 1, slurm_state=None, iter_before=before, iter_after=after, stalled=stalled
    )


def test_a_stalled_runner_is_a_runner_without_progress_even_if_its_counter_moved() -> None:
    first = decide(_outcome(10, 12), Policy(100), Tally())
    assert first.verdict is Verdict.CONTINUE and first.reason.startswith(STALLED_REASON)
    assert "600 s" in first.reason and first.progress.no_progress == 1 and first.progress.retries_used == 0
    second = decide(_outcome(12, 12), Policy(100), first.progress)
    assert second.verdict is Verdict.STOP and second.state is ChainState.STOPPED
    assert second.reason.startswith(STALLED_REASON) and "2 runners in a row" in second.reason


def test_without_the_watchdog_the_same_runner_is_a_handoff() -> None:
    decision = decide(_outcome(10, 12, stalled=None), Policy(100), Tally(no_progress=1))
    assert decision.verdict is Verdict.CONTINUE and decision.progress.no_progress == 0


def test_the_runner_stops_an_app_that_hangs(tmp_path: Path) -> None:
    """No output, no counter, no heartbeat: stopped after --stall-timeout, long before its stop time."""
    chain, settings = _chain(tmp_path, "touch ready; exec sleep 60", counter=5, stall_timeout=1)
    started = time.monotonic()
    code, record = _run(tmp_path, chain, settings, clock=time.time)
    assert time.monotonic() - started < 15
    assert record.stalled is not None and 1.0 <= record.stalled < 5.0
    assert record.stop_sent is not None and "stopped as stalled" in record.detail
    decision = _judge(tmp_path, chain, settings, record)
    assert decision.verdict is Verdict.CONTINUE and decision.reason.startswith(STALLED_REASON)
    assert code == 1  # stopped without advance, as at the deadline


def test_an_app_that_touches_its_heartbeat_is_not_stalled(tmp_path: Path) -> None:
    app = (
        "trap 'echo 7 > state_iter.txt; exit 99' TERM; touch ready; "
        'while :; do touch "$CHAIN_HEARTBEAT"; sleep 0.2; done'
    )
    chain, settings = _chain(tmp_path, app, counter=5, stall_timeout=1)
    # real time for 3 s (three stall timeouts), then past the planned stop time
    t0 = time.time()
    code, record = _run(tmp_path, chain, settings, clock=lambda: time.time() + (130.0 if time.time() - t0 > 3 else 0.0))
    assert record.stalled is None and "stalled" not in record.detail
    assert code == 124 and record.iter_after == 7  # stopped at its planned time, counter advanced
