"""The progress plot: its data series equal the iteration log's; the PNG is a real image."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest
from _report_data import ITER_LOG, ITER_LOG_RESTART
from _runners import both as _runners

from chain.core.records import RunnerView
from chain.reporting.metrics import parse_iteration_log
from chain.reporting.plot import progress_data, render_progress


def test_series_equal_the_iteration_log() -> None:
    events = parse_iteration_log(ITER_LOG)
    data = progress_data(events, _runners(), max_iter=30, chain_id="chain-effb11")
    assert data.source == "iterations.log"
    assert [s.job for s in data.segments] == ["36", "37", "38"]
    plotted = [(t, i) for s in data.segments for t, i in zip(s.times, s.iterations)]
    from_log = [
        (float(w[0]), int(w[2])) for w in (line.split() for line in ITER_LOG.splitlines()) if w[1] in ("start", "iter")
    ]
    assert plotted == from_log
    assert data.checkpoints == [
        (float(w[0]), int(w[2])) for w in (line.split() for line in ITER_LOG.splitlines()) if w[1] == "ckpt"
    ]
    assert data.segments[1].iterations[0] == 11  # each segment starts at the restored counter


def test_runner_spans_and_queue_gaps() -> None:
    runners = _runners()
    data = progress_data(parse_iteration_log(ITER_LOG), runners, max_iter=30, chain_id="c")
    assert [(s.job, s.seq, s.start, s.end) for s in data.spans] == [(r.job_id, r.seq, r.start, r.end) for r in runners]
    # gaps: first submission -> first start, then each end -> next start
    assert data.gaps == [
        (1795938872.620649, 1795938875.6853447),
        (1795938881.5052211, 1795938882.8722122),
        (1795938888.7277374, 1795938892.0808673),
    ]
    assert data.rate_per_hour == pytest.approx(30 * 3600 / (1795938896.3823469 - 1795938872.620649))
    assert data.t0 == 1795938872.620649


def test_restart_shows_as_a_new_segment_going_back() -> None:
    data = progress_data(parse_iteration_log(ITER_LOG_RESTART), [], max_iter=15, chain_id="c")
    assert [(s.job, s.iterations[0], s.iterations[-1]) for s in data.segments] == [("50", 0, 13), ("51", 10, 15)]
    assert data.spans == [] and data.gaps == []
    assert data.rate_per_hour == pytest.approx((13 + 5) * 3600 / 27.5)  # from the log alone


def test_fallback_to_runner_records() -> None:
    runners = _runners()
    data = progress_data([], runners, max_iter=30, chain_id="c")
    assert data.source == "runner records"
    # the counter reaches iter_after at the runner's end when nothing tells when it was saved
    assert [(s.times, s.iterations) for s in data.segments] == [
        ([r.start, r.end, r.end], [r.iter_before, r.iter_after, r.iter_after]) for r in runners
    ]
    assert data.redone == []


def test_records_rise_to_the_last_save_and_mark_the_lost_stretch() -> None:
    killed = RunnerView(
        job_id="41",
        seq=1,
        start=100.0,
        end=160.0,
        stop_sent=155.0,
        saved_at=140.0,
        iter_before=0,
        iter_after=10,
        iter_first=0,
        iter_reached=17,
        app_exit_code=143,
    )
    after = RunnerView(
        job_id="42", seq=2, start=170.0, end=200.0, iter_before=10, iter_after=20, app_exit_code=0, saved_at=500.0
    )  # a save time outside the runner is not believed
    data = progress_data([], [killed, after], max_iter=20, chain_id="c")
    assert [(s.times, s.iterations) for s in data.segments] == [
        ([100.0, 140.0, 160.0], [0, 10, 10]),
        ([170.0, 200.0, 200.0], [10, 20, 20]),
    ]
    assert data.redone == [(140.0, 155.0, 10, 18)]  # iterations 10..17 computed after the save at 10
    # the last runner's lost work is redone by nobody: not drawn, as it is not counted
    alone = progress_data([], [killed], max_iter=20, chain_id="c")
    assert alone.redone == []


@pytest.mark.parametrize("log", [ITER_LOG, ""])
def test_png_is_a_sensible_image(tmp_path: Path, log: str) -> None:
    data = progress_data(parse_iteration_log(log), _runners(), max_iter=30, chain_id="chain-effb11")
    path = tmp_path / "progress.png"
    path.write_bytes(render_progress(data))
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert width > 300 and height > 300
    assert image.std() > 0.01  # not a blank canvas


def test_png_of_an_empty_chain(tmp_path: Path) -> None:
    data = progress_data([], [], max_iter=10, chain_id="c")
    path = tmp_path / "p.png"
    path.write_bytes(render_progress(data))
    assert matplotlib.image.imread(path).shape[1] > 300
