"""Work redone from the runner records (issue 27, lost work made visible):
what each runner's app lost is known from ``--progress-pattern`` (the first
and last iteration it printed) or from an exit of its own (0, 99: it saved),
and unknown for an app killed or failed without either; an unknown loss
takes the efficiency away instead of counting the rework as useful."""

from __future__ import annotations

from typing import Any

import pytest

from chain.reporting.metrics import chain_metrics, efficiency, lost_iterations, redone_from_runners
from chain.reporting.printed import redone_line
from chain.store.records import RunnerView


def _runner(seq: int, before: int, after: int, **facts: Any) -> RunnerView:
    start = 100.0 * seq
    return RunnerView(
        job_id=str(40 + seq),
        seq=seq,
        iter_before=before,
        iter_after=after,
        start=start,
        end=start + 60.0,
        stop_to_exit=5.0,
        **facts,
    )


# nanoGPT's numbering: "iter N" printed after computing iteration N (0-based); killed at the stop
KILLED_0_BASED = _runner(1, 0, 10, iter_first=0, iter_reached=17, app_exit_code=143)
# a 1-based "step N/500" printer resumed at 10: steps 11..17 computed, 20 kept -> nothing lost
STEP_1_BASED = _runner(2, 10, 20, iter_first=11, iter_reached=20, app_exit_code=143)


@pytest.mark.parametrize(
    ("runner", "lost"),
    [
        (KILLED_0_BASED, 8),  # iterations 10..17 computed after its last save (10)
        (_runner(1, 10, 20, iter_first=11, iter_reached=27, app_exit_code=143), 7),  # 1-based: 21..27
        (STEP_1_BASED, 0),
        (_runner(1, 0, 10, app_exit_code=99), 0),  # saved and exited by itself: the contract
        # an app printing "step N" before computing N, then saving and exiting: its exit says it lost nothing
        (_runner(1, 0, 10, iter_first=1, iter_reached=11, app_exit_code=99), 0),
        (_runner(1, 0, 10, app_exit_code=0, stop_sent=150.0), 0),  # saved on TERM and exited 0
        (_runner(1, 0, 10, app_exit_code=99, killed=True), None),  # outlived the grace: killed mid-save
        (_runner(1, 0, 10, app_exit_code=143), None),  # died of the stop signal, nothing printed
        (_runner(1, 0, 10, app_exit_code=1), None),  # a failure loses what it computed since its save
        (_runner(1, 0, 10), None),  # no record of the app's end (NODE_FAIL, TIMEOUT with no record)
        (_runner(1, 0, 0, superseded=True), 0),  # never ran the app
    ],
)
def test_what_one_runner_lost(runner: RunnerView, lost: int | None) -> None:
    assert lost_iterations(runner) == lost


def test_the_next_runner_redoes_what_a_killed_one_lost_at_its_pace() -> None:
    runners = [KILLED_0_BASED, _runner(2, 10, 20, app_exit_code=99), _runner(3, 20, 30, app_exit_code=0)]
    redone = redone_from_runners(runners)
    assert (redone.iterations, redone.by_job, redone.unknown, redone.source) == (8, {"42": 8}, (), "runner records")
    # runner 1 computed 18 iterations in its 55 s of useful time (start to stop): 8 of them at that pace
    assert redone.seconds == pytest.approx(55.0 * 8 / 18)
    allocated, useful = 180.0, 3 * 55.0
    assert efficiency(runners) == pytest.approx((useful - 55.0 * 8 / 18) / allocated)


def test_a_kill_nothing_tells_about_takes_the_efficiency_away() -> None:
    runners = [_runner(1, 0, 10, app_exit_code=143), _runner(2, 10, 20, app_exit_code=0)]
    redone = redone_from_runners(runners)
    assert redone.unknown == ("1",) and redone.iterations == 0
    assert efficiency(runners) is None
    metrics = chain_metrics(runners, 20, 20, now=500.0, ended=True)
    assert metrics["efficiency"] is None and metrics["redone_unknown"] == ["1"]


def test_the_last_runner_and_a_stalled_one_add_nothing() -> None:
    # the last runner's extra iteration past its save is redone by nobody; a runner whose
    # counter did not move already counts its whole time as lost
    stalled = _runner(1, 0, 0, app_exit_code=143)
    last = _runner(2, 0, 20, iter_first=0, iter_reached=20, app_exit_code=0)
    redone = redone_from_runners([stalled, last])
    assert (redone.iterations, redone.unknown) == (0, ())
    assert efficiency([stalled, last]) == pytest.approx(55.0 / 120.0)


def test_a_runner_still_running_is_not_judged() -> None:
    live = RunnerView(job_id="43", seq=3, iter_before=20, start=300.0)
    assert redone_from_runners([_runner(1, 0, 10, app_exit_code=99), live]).unknown == ()


def test_the_printed_line_says_what_is_known() -> None:
    totals = {"redone_iterations": 8, "redone_s": 24.4}
    known = {"iterations": 8, "unknown": [], "source": "runner records"}
    assert redone_line(known, totals) == "redone 8 it (24.4s), from the runner records"
    line = redone_line(
        {"iterations": 8, "unknown": ["2", "5"], "source": "runner records"},
        {"redone_iterations": None, "redone_s": None},
    )
    assert line == "redone unknown (≥ 8 it): runner 2, 5 killed or failed; see --progress-pattern"
    assert len(line) <= 80
    many = redone_line({"iterations": 0, "unknown": [str(n) for n in range(1, 41)]}, totals)
    assert "runner 1, … 40 (40) killed" in many and len(many) <= 80
