"""The sweep report's pure parts: each point's series, the CSV, the metric table."""

from __future__ import annotations

import csv
import io

from chain.core.records import RunnerView
from chain.core.settings import Settings
from chain.reporting.metrics import IterEvent
from chain.sweep.params import Point
from chain.sweep.record import SweepRecord
from chain.sweep.report import PointReport, PointSeries, csv_bytes, logged_series, metric_table, point_series
from chain.sweep.table import PointRow, PointState


def test_runner_marks_then_the_counter_now() -> None:
    runners = [
        RunnerView("2", start=50.0, iter_before=4),
        RunnerView("1", start=10.0, end=40.0, iter_before=0, iter_after=4),
    ]
    series = point_series("p", runners, 70.0, 6, live=True)
    assert (series.times, series.iterations) == ((10.0, 40.0, 50.0, 70.0), (0, 4, 4, 6))
    assert point_series("p", [], 70.0, 0, live=True).times == ()


def test_the_iteration_log_is_thinned_and_keeps_its_last_mark() -> None:
    events = [IterEvent(float(i), "iter", i, "1", 9) for i in range(1, 1001)] + [
        IterEvent(1001.0, "exit", 1000, "1", 9, 0)
    ]
    series = logged_series("p", events, most=100)
    assert series is not None and len(series.times) <= 101 and series.iterations[-1] == 1000
    assert series.iterations[0] == 1
    assert logged_series("p", []) is None


def _report(name: str, state: PointState, value: float | None, **params: int) -> PointReport:
    row = PointRow(name, params, state, 3, 10, None, None, "why", "chain-1")
    return PointReport(row, PointSeries(name, (), ()), value, 2)


def test_the_csv_has_a_row_per_point_and_a_column_per_parameter() -> None:
    record = SweepRecord.new(Settings(app_cmd="x"), [Point.of({"a": 1}), Point.of({"a": 2, "b": 3})], 0.0)
    points = [_report("a=1", PointState.RUNNING, 0.5, a=1), _report("a=2_b=3", PointState.FAILED, None, a=2, b=3)]
    rows = list(csv.DictReader(io.StringIO(csv_bytes(record, points).decode())))
    assert list(rows[0])[-2:] == ["param.a", "param.b"]
    assert (rows[0]["point"], rows[0]["efficiency"], rows[0]["param.b"]) == ("a=1", "0.5", "")
    assert (rows[1]["state"], rows[1]["efficiency"], rows[1]["param.b"]) == ("failed", "", "3")


def test_the_metric_table_is_best_first() -> None:
    points = [
        _report("x", PointState.COMPLETED, 0.5),
        _report("y", PointState.COMPLETED, 0.9),
        _report("z", PointState.COMPLETED, None),
    ]
    assert metric_table(points) == [("y", 0.9), ("x", 0.5)]
