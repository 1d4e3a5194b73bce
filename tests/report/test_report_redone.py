"""Work redone from the runner records (lost work made visible):
what each runner's app lost is known from ``--progress-pattern`` (the first
and last iteration it printed) or from an exit of its own (0, 99: it saved),
and unknown for an app killed or failed without either; an unknown loss
takes the efficiency away instead of counting the rework as useful."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from _report_data import ITER_LOG_RESTART

from chain.core.records import RunnerView
from chain.reporting.metrics import (
    chain_metrics,
    efficiency,
    lost_iterations,
    parse_iteration_log,
    redone_from_runners,
    work_redone,
)
from chain.reporting.printed import redone_line
from chain.reporting.usage import build_rows, usage_totals


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


# --- the columns add up to the totals (numbers that add up) -------------------------------

# nanoGPT's shape: the counter checkpointed every 5 steps, the app killed by the stop signal between
# two saves (no handler: exit 143); "iter N" printed after computing N (0-based). Runner 1 computed
# 0..12 and kept 10 (3 lost), runner 2 computed 10..24 and kept 20 (5 lost), runner 3 finished.
NANOGPT_LIKE = [
    _runner(1, 0, 10, iter_first=0, iter_reached=12, app_exit_code=143, killed=False),
    _runner(2, 10, 20, iter_first=10, iter_reached=24, app_exit_code=143),
    dataclasses.replace(_runner(3, 20, 30, app_exit_code=0), end=340.0, stop_to_exit=None),
]


def _check_sums(rows: list[dict[str, Any]], totals: dict[str, Any]) -> None:
    """Each row and the totals: allocated = new work + redone + lost, the columns summing to the totals."""
    for row in rows:
        new = row["useful_s"] - row["redone_s"]
        assert new >= 0 and row["allocated_s"] == pytest.approx(new + row["redone_s"] + row["lost_s"])
    for column in ("allocated_s", "useful_s", "redone_s", "lost_s", "redone_iterations"):
        assert totals[column] == pytest.approx(sum(row[column] for row in rows)), column
    new = totals["useful_s"] - totals["redone_s"]
    assert totals["allocated_s"] == pytest.approx(new + totals["redone_s"] + totals["lost_s"])
    assert totals["efficiency"] == pytest.approx(new / totals["allocated_s"], abs=1e-4)


def test_each_runner_shows_the_work_it_redid_and_the_columns_add_up() -> None:
    redone = redone_from_runners(NANOGPT_LIKE)
    rows = build_rows(NANOGPT_LIKE, {}, redone)
    totals = usage_totals(rows, redone)
    # what runner 1 lost (3) runner 2 redid at runner 1's pace (55 s for 13), runner 2's 5 runner 3 at its own
    assert [(r["job_id"], r["redone_iterations"], r["redone_s"]) for r in rows] == [
        ("41", 0, 0.0),
        ("42", 3, round(55.0 * 3 / 13, 3)),
        ("43", 5, round(55.0 * 5 / 15, 3)),
    ]
    assert [r["lost_s"] for r in rows] == [5.0, 5.0, 0.0]  # the stop-to-exit margins
    assert (totals["redone_iterations"], totals["redone_s"]) == (8, round(55.0 * 3 / 13, 3) + round(55.0 * 5 / 15, 3))
    _check_sums(rows, totals)
    # chain status's figures are the same: its efficiency and its redone work
    metrics = chain_metrics(NANOGPT_LIKE, 30, 30, now=400.0, ended=True)
    assert metrics["redone_iterations"] == 8 and metrics["redone_s"] == pytest.approx(totals["redone_s"], abs=2e-3)
    assert metrics["efficiency"] == pytest.approx(totals["efficiency"], abs=1e-4)


def test_a_runner_that_redid_work_and_then_kept_nothing_counts_its_time_once() -> None:
    # runner 2 redid runner 1's 3 lost iterations, then was killed before its first save: its
    # counter did not move, so its whole allocation is lost, none of it redone (not counted twice)
    stalled = _runner(2, 10, 10, iter_first=10, iter_reached=14, app_exit_code=143)
    runners = [NANOGPT_LIKE[0], stalled, dataclasses.replace(NANOGPT_LIKE[2], iter_before=10)]
    redone = redone_from_runners(runners)
    rows = build_rows(runners, {}, redone)
    assert [(r["redone_iterations"], r["redone_s"], r["lost_s"]) for r in rows] == [
        (0, 0.0, 5.0),
        (3, 0.0, 60.0),
        (0, 0.0, 0.0),
    ]
    _check_sums(rows, usage_totals(rows, redone))


def test_the_iteration_logs_redone_work_is_in_the_row_of_the_job_that_redid_it() -> None:
    # an app whose counter went back: job 37 computed 11..13 and lost them, job 38 computed them again
    log = ITER_LOG_RESTART.replace(" 50 ", " 37 ").replace(" 51 ", " 38 ")
    runners = [
        RunnerView(job_id="37", seq=1, iter_before=0, iter_after=10, start=999.5, end=1014.0, app_exit_code=137),
        RunnerView(job_id="38", seq=2, iter_before=10, iter_after=15, start=1019.5, end=1028.0, app_exit_code=0),
    ]
    redone = work_redone(parse_iteration_log(log))
    rows = build_rows(runners, {}, redone)
    assert [(r["job_id"], r["redone_iterations"], r["redone_s"]) for r in rows] == [("37", 0, 0.0), ("38", 3, 4.5)]
    totals = usage_totals(rows, redone)
    assert (totals["redone_iterations"], totals["redone_s"]) == (3, 4.5)
    _check_sums(rows, totals)


def test_unknown_redone_work_leaves_the_columns_empty() -> None:
    runners = [_runner(1, 0, 10, app_exit_code=143), _runner(2, 10, 20, app_exit_code=0)]
    rows = build_rows(runners, {}, None)
    totals = usage_totals(rows, redone_from_runners(runners))
    assert {(r["redone_iterations"], r["redone_s"]) for r in rows} == {(None, None)}
    assert (totals["redone_iterations"], totals["redone_s"], totals["efficiency"]) == (None, None, None)
    assert chain_metrics(runners, 20, 20, now=500.0)["redone_iterations"] is None
