"""Pure metrics: useful time, rate, ETA, efficiency, the iteration log, work redone."""

from __future__ import annotations

import pytest
from _report_data import ITER_LOG, ITER_LOG_RESTART
from _runners import judged, recorded

from chain.core.records import RunnerView as R
from chain.reporting.metrics import (
    chain_metrics,
    efficiency,
    parse_iteration_log,
    rate_per_hour,
    useful_seconds,
    work_redone,
)


def test_useful_until_exit_when_the_app_ended_itself() -> None:
    assert useful_seconds(R(start=100.0, end=160.0, stop_sent=None)) == 60.0


def test_useful_until_the_stop_signal() -> None:
    assert useful_seconds(R(start=100.0, end=160.0, stop_sent=150.0, stop_to_exit=10.0)) == 50.0
    # runners.jsonl has no stop_sent, only stop_to_exit: same answer
    assert useful_seconds(R(start=100.0, end=160.0, stop_to_exit=10.0)) == 50.0


@pytest.mark.parametrize(
    "runner",
    [
        R(),
        R(start=1.0),
        R(start=1.0, end=None),
        R(start=1.0, end=5.0, superseded=True),
    ],
)
def test_no_useful_time_without_an_app_run(runner: R) -> None:
    assert useful_seconds(runner) == 0.0


def test_chain_metrics_on_a_real_chain() -> None:
    runners = judged()
    m = chain_metrics(runners, 30, 30, now=1795938900.0)
    # 30 iterations from the first submission (…872.62) to the last end (…896.38)
    assert m["rate_per_hour"] == pytest.approx(30 * 3600 / (1795938896.3823469 - 1795938872.620649))
    assert m["eta_seconds"] == 0.0
    useful = sum(r.end - r.start for r in runners if r.end is not None and r.start is not None)
    assert m["efficiency"] == pytest.approx(1.0)  # own records only: the app ran the whole runner wall
    assert useful > 0


def test_rate_uses_the_recent_runners_and_gaps_between_them() -> None:
    runners = [
        R(start=0.0, end=100.0, iter_before=0, iter_after=1000, submitted=0.0),
        # slow recent runners: 10 iterations per 100 s allocation, 50 s handoff before each
        R(start=150.0, end=250.0, iter_before=1000, iter_after=1010),
        R(start=300.0, end=400.0, iter_before=1010, iter_after=1020),
    ]
    assert rate_per_hour(runners, 1020, now=400.0, recent=2) == pytest.approx(20 * 3600 / 300)
    m = chain_metrics(runners, 1020, 1040, now=400.0)
    assert m["eta_seconds"] == pytest.approx(20 * 3600 / m["rate_per_hour"])


def test_eta_unknown_before_any_progress() -> None:
    m = chain_metrics([R(start=10.0, iter_before=0, submitted=5.0)], 0, 100, now=50.0)
    assert m == {
        "rate_per_hour": None,
        "eta_seconds": None,
        "efficiency": None,
        "redone_unknown": [],
        "redone_iterations": 0,
        "redone_s": 0.0,
    }
    assert chain_metrics([], 0, 100, now=0.0)["eta_seconds"] is None


def test_live_runner_counts_once_its_counter_moved() -> None:
    live = R(start=10.0, iter_before=0, submitted=5.0)
    assert chain_metrics([live], 0, 72, now=370.0)["rate_per_hour"] is None
    m = chain_metrics([live], 36, 72, now=370.0)
    assert m["rate_per_hour"] == pytest.approx(36 * 3600 / 365)  # from its submission
    assert m["eta_seconds"] == pytest.approx(365.0)


def test_efficiency_from_records() -> None:
    runners = [R(start=0.0, end=100.0, stop_sent=90.0), R(start=200.0, end=300.0)]
    assert efficiency(runners) == pytest.approx(190 / 200)
    assert efficiency(recorded()) == pytest.approx(1.0)


def test_parse_iteration_log() -> None:
    events = parse_iteration_log(ITER_LOG + "garbage line\n1795938899.1 iter\n")
    assert len(events) == len(ITER_LOG.splitlines())
    first, last = events[0], events[-1]
    assert (first.time, first.event, first.iteration, first.job, first.pid, first.code) == (
        1795938875.908,
        "start",
        0,
        "36",
        2698,
        None,
    )
    assert (last.event, last.iteration, last.job, last.code) == ("exit", 30, "38", 0)
    assert [e.iteration for e in events if e.event == "iter"] == list(range(1, 31))


def test_no_work_redone_in_a_clean_chain() -> None:
    redone = work_redone(parse_iteration_log(ITER_LOG))
    assert (redone.iterations, redone.seconds, redone.by_job, redone.restarts) == (0, 0.0, {}, 0)


def test_work_redone_after_a_restart_behind_the_last_computed_iteration() -> None:
    redone = work_redone(parse_iteration_log(ITER_LOG_RESTART))
    assert redone.iterations == 3  # 11, 12, 13 computed by job 50, lost, computed again by job 51
    assert redone.by_job == {"51": 3}
    assert redone.restarts == 1
    assert redone.seconds == pytest.approx(4.5)  # three 1.5 s iterations of job 51
