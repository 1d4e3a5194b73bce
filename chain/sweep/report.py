"""``chain sweep report``: one CSV of every point, one figure, a metric table.

``report/sweep.csv``: a row per point (its parameters, state, progress, rate,
ETA, efficiency, runners, reason). ``report/sweep.png``: each point's
iterations over the sweep's time, and how many points are in each state.
The metric is the one every chain's report computes from its runners
(``chain.reporting.metrics.efficiency``: the share of the runners' time
that did useful work); ``metric_table`` sorts the points by it. Only the
sweep's ``report`` directory is written; the chains' files are read.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.core.records import RunnerView
from chain.errors import ChainDirError, ChainError
from chain.primitives import atomic
from chain.reporting.metrics import IterEvent, efficiency
from chain.reporting.report import _read_events as read_events
from chain.reporting.usage import load_runners
from chain.store import ChainDir
from chain.sweep.params import scalar_text
from chain.sweep.record import SweepRecord
from chain.sweep.store import SweepDir
from chain.sweep.table import PointRow, SweepStatus

CSV_NAME = "sweep.csv"
FIGURE_NAME = "sweep.png"
FIXED_COLUMNS = (
    "point",
    "state",
    "iteration",
    "max_iter",
    "rate_per_hour",
    "eta_seconds",
    "efficiency",
    "runners",
    "chain_id",
    "reason",
)
PARAM_PREFIX = "param."
SERIES_POINTS = 500  # marks per point in the figure at most
LOGGED = ("start", "iter", "ckpt")  # the iteration log's events that tell the counter


@dataclass(frozen=True)
class SweepReport:
    """What ``chain sweep report`` wrote, and the points by the metric (the best first)."""

    csv: Path
    figure: Path
    metric: tuple[tuple[str, float], ...]

    @property
    def paths(self) -> list[Path]:
        return [self.csv, self.figure]


@dataclass(frozen=True)
class PointSeries:
    """A point's progress: (epoch seconds, iteration) in time order."""

    name: str
    times: tuple[float, ...]
    iterations: tuple[int, ...]


@dataclass(frozen=True)
class PointReport:
    """One point's row and what its runners tell."""

    row: PointRow
    series: PointSeries
    efficiency: float | None
    runners: int


def point_series(name: str, runners: Sequence[RunnerView], now: float, iteration: int, live: bool) -> PointSeries:
    """From the runner records: each runner's start and end counters, then (running) the counter now."""
    marks: list[tuple[float, int]] = []
    for runner in sorted((r for r in runners if r.start is not None), key=lambda r: r.start or 0.0):
        assert runner.start is not None
        marks.append((runner.start, runner.iter_before or 0))
        if runner.end is not None and runner.iter_after is not None:
            marks.append((runner.end, runner.iter_after))
    if live and marks:
        marks.append((now, iteration))
    return PointSeries(name, tuple(t for t, _ in marks), tuple(i for _, i in marks))


def logged_series(name: str, events: Sequence[IterEvent], most: int = SERIES_POINTS) -> PointSeries | None:
    """From the app's iteration log (each iteration as it was done), thinned
    to about ``most`` marks; None when it logged none."""
    marks = [(e.time, e.iteration) for e in events if e.event in LOGGED]
    if not marks:
        return None
    step = max(1, len(marks) // most)
    kept = marks[::step] + ([marks[-1]] if (len(marks) - 1) % step else [])
    return PointSeries(name, tuple(t for t, _ in kept), tuple(i for _, i in kept))


def columns(record: SweepRecord) -> list[str]:
    """The CSV's header: the fixed columns, then one per parameter name."""
    names = sorted({name for entry in record.points for name in entry.point.names()})
    return [*FIXED_COLUMNS, *(PARAM_PREFIX + name for name in names)]


def csv_bytes(record: SweepRecord, points: Sequence[PointReport]) -> bytes:
    """The sweep's CSV: one row per point, in the sweep's order."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns(record))
    writer.writeheader()
    for point in points:
        row = point.row
        values: dict[str, object] = {
            "point": row.name,
            "state": row.state.value,
            "iteration": row.iteration,
            "max_iter": row.max_iter,
            "rate_per_hour": _round(row.rate_per_hour),
            "eta_seconds": _round(row.eta_seconds),
            "efficiency": _round(point.efficiency),
            "runners": point.runners,
            "chain_id": row.chain_id,
            "reason": row.stranded or row.reason,
            **{PARAM_PREFIX + k: scalar_text(v) for k, v in row.params.items()},
        }
        writer.writerow({k: "" if v is None else v for k, v in values.items()})
    return out.getvalue().encode("utf-8")


def metric_table(points: Sequence[PointReport]) -> list[tuple[str, float]]:
    """(point, efficiency) of the points whose runners tell it, the best first."""
    known = [(p.row.name, p.efficiency) for p in points if p.efficiency is not None]
    return sorted(((name, value) for name, value in known if value is not None), key=lambda item: (-item[1], item[0]))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def gather(store: SweepDir, record: SweepRecord, status: SweepStatus, now: float) -> list[PointReport]:
    """Each point's row with its runners' series and efficiency (read, never written)."""
    reports = []
    for entry, row in zip(record.points, status.rows):
        runners: list[RunnerView] = []
        if row.chain_id:
            try:
                runners = load_runners(ChainDir(store.chain_dir(entry)))
            except (ChainError, OSError):
                runners = []  # a damaged chain: its row says so; the others are reported
        events, _ = read_events(store.point_dir(entry))  # a log not read: the runners tell the progress
        series = logged_series(row.name, events) or point_series(
            row.name, runners, now, row.iteration, row.state.active
        )
        reports.append(PointReport(row, series, efficiency(runners) if runners else None, len(runners)))
    return reports


def render_figure(points: Sequence[PointReport], counts: Mapping[str, int], *, dpi: int = 100) -> bytes:
    """Progress of every point over time (left) and the state counts (right): PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 5), dpi=dpi)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    _plot_progress(left, points)
    shown = {state: n for state, n in counts.items() if n}
    right.bar(list(shown), list(shown.values()), color="tab:blue")
    right.set_title("points by state")
    right.yaxis.get_major_locator().set_params(integer=True)
    right.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def _plot_progress(axes: Any, points: Sequence[PointReport]) -> None:
    """Each point's iterations over the time since the sweep's first start, in s, min or h."""
    series = [p.series for p in points if p.series.times]
    t0 = min((s.times[0] for s in series), default=0.0)
    span = max((s.times[-1] for s in series), default=t0) - t0
    unit, scale = ("s", 1.0) if span < 120 else ("min", 60.0) if span < 7200 else ("h", 3600.0)
    for point in points:
        if point.series.times:
            x = [(t - t0) / scale for t in point.series.times]
            axes.plot(x, point.series.iterations, marker=".", markersize=3, linewidth=1, label=point.row.name)
    axes.set_xlabel(f"time since the sweep's first start ({unit})")
    axes.set_ylabel("iteration")
    axes.set_title(f"progress of {len(points)} points")
    axes.grid(True, alpha=0.3)
    if 0 < len(series) <= 20:
        axes.legend(fontsize=6, loc="upper left")


def write_sweep_report(
    store: SweepDir, record: SweepRecord, status: SweepStatus, *, now: float | None = None
) -> SweepReport:
    """Write the CSV and the figure into the sweep's ``report`` directory."""
    when = time.time() if now is None else now
    points = gather(store, record, status, when)
    try:
        store.report_dir.mkdir(parents=True, exist_ok=True)
        csv_path, png_path = store.report_dir / CSV_NAME, store.report_dir / FIGURE_NAME
        atomic.write_bytes_atomic(csv_path, csv_bytes(record, points))
        atomic.write_bytes_atomic(png_path, render_figure(points, status.counts))
    except OSError as exc:
        raise ChainDirError(f"cannot write the sweep's report in {store.report_dir}: {exc.strerror or exc}") from None
    return SweepReport(csv_path, png_path, tuple(metric_table(points)))
