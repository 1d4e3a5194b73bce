"""The progress plot: iteration vs wall-clock time across the whole chain.

``progress_data`` (pure) turns the iteration log and the runner records into
the series that ``render_progress`` draws; tests check the series against the
log and the PNG separately.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # no display: the report runs inside a batch job

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from chain.core.records import RunnerView
from chain.reporting.metrics import (
    IterEvent,
    format_rate,
    gain,
    lost_and_redone,
    rate_per_hour,
)


@dataclass(frozen=True)
class Segment:
    """One app run: its points (time, iteration) from its start and iter events."""

    job: str
    times: list[float]
    iterations: list[int]


@dataclass(frozen=True)
class Span:
    job: str
    seq: int | None
    start: float
    end: float


@dataclass
class ProgressData:
    chain_id: str
    max_iter: int
    source: str  # "iterations.log" or "runner records"
    segments: list[Segment] = field(default_factory=list)
    checkpoints: list[tuple[float, int]] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)  # runner allocations
    gaps: list[tuple[float, float]] = field(default_factory=list)  # no runner running
    # what a killed app computed past its last save, lost and redone: (from, to) in time and iteration
    redone: list[tuple[float, float, int, int]] = field(default_factory=list)
    rate_per_hour: float | None = None

    @property
    def t0(self) -> float:
        starts = [s.times[0] for s in self.segments if s.times]
        starts += [s.start for s in self.spans] + [g[0] for g in self.gaps]
        return min(starts) if starts else 0.0


def _spans(runners: list[RunnerView]) -> list[Span]:
    spans = [Span(r.job_id, r.seq, r.start, r.end) for r in runners if r.start is not None and r.end is not None]
    return sorted(spans, key=lambda s: s.start)


def _gaps(spans: list[Span], runners: list[RunnerView]) -> list[tuple[float, float]]:
    """Intervals from the first submission to the last end with no runner running."""
    if not spans:
        return []
    submitted = [r.submitted for r in runners if r.submitted]
    cursor = min([spans[0].start, *submitted])
    gaps = []
    for span in spans:
        if span.start > cursor:
            gaps.append((cursor, span.start))
        cursor = max(cursor, span.end)
    return gaps


def progress_data(
    events: list[IterEvent], runners: list[RunnerView], *, max_iter: int, chain_id: str, now: float | None = None
) -> ProgressData:
    """Pure: the plotted series.

    With an iteration log: one segment per app process (its ``start`` event,
    then each ``iter`` event, in log order) and the ``ckpt`` events. Without
    one: per runner, the counter rising from ``iter_before`` at its start to
    ``iter_after`` when its checkpoint file was last written (``saved_at``,
    else the runner's end), then flat: nothing it computed after that was
    kept; and, where ``--progress-pattern`` told how far a killed app got, the
    stretch it computed past that save and lost.
    """
    spans = _spans(runners)
    data = ProgressData(
        chain_id=chain_id,
        max_iter=max_iter,
        spans=spans,
        gaps=_gaps(spans, runners),
        source="iterations.log" if events else "runner records",
    )
    if events:
        data.segments, data.checkpoints = _log_series(events)
    else:
        data.segments = _record_segments(runners)
        data.redone = _record_redone(runners)
    data.rate_per_hour = _rate(data, runners, now)
    return data


def _log_series(events: list[IterEvent]) -> tuple[list[Segment], list[tuple[float, int]]]:
    """Segments (one per app process) and checkpoints from the iteration log."""
    segments: list[Segment] = []
    checkpoints = [(ev.time, ev.iteration) for ev in events if ev.event == "ckpt"]
    by_pid: dict[tuple[str, int], Segment] = {}
    for ev in events:
        if ev.event not in ("start", "iter"):
            continue
        key = (ev.job, ev.pid)
        if ev.event == "start" or key not in by_pid:
            by_pid[key] = Segment(ev.job, [], [])
            segments.append(by_pid[key])
        by_pid[key].times.append(ev.time)
        by_pid[key].iterations.append(ev.iteration)
    return segments, checkpoints


@dataclass(frozen=True)
class _Finished:
    """A runner that ran from ``start`` to ``end``, its counter known at both."""

    runner: RunnerView
    start: float
    end: float
    before: int
    after: int

    @property
    def saved(self) -> float:
        """When the runner's counter moved to ``after``: its checkpoint file's
        mtime when that fell inside the runner, else its end (all that is known)."""
        saved = self.runner.saved_at
        return saved if saved is not None and self.start <= saved <= self.end else self.end


def _finished(runners: list[RunnerView]) -> list[_Finished]:
    done = [
        _Finished(r, r.start, r.end, r.iter_before, r.iter_after)
        for r in runners
        if r.start is not None and r.end is not None and r.iter_before is not None and r.iter_after is not None
    ]
    return sorted(done, key=lambda f: f.start)


def _record_segments(runners: list[RunnerView]) -> list[Segment]:
    """Without a log: each finished runner's counter, up to its last save, then flat."""
    return [
        Segment(f.runner.job_id, [f.start, f.saved, f.end], [f.before, f.after, f.after]) for f in _finished(runners)
    ]


def _record_redone(runners: list[RunnerView]) -> list[tuple[float, float, int, int]]:
    """The stretches killed apps computed past their last save, as far as they printed."""
    stretches = []
    finished = {id(f.runner): f for f in _finished(runners)}
    for r, _, lost in lost_and_redone(runners):
        f = finished.get(id(r))
        if lost and f is not None:
            until = r.stop_sent if r.stop_sent is not None else f.end
            stretches.append((f.saved, max(f.saved, until), f.after, f.after + lost))
    return stretches


def _rate(data: ProgressData, runners: list[RunnerView], now: float | None) -> float | None:
    """``rate_per_hour`` up to ``now`` (default: the last runner's end); with
    no finished runner yet, the plotted segments' own rate."""
    current = max([0, *(i for s in data.segments for i in s.iterations)])
    last = max([s.end for s in data.spans], default=0.0)
    rate = rate_per_hour(runners, current, now if now is not None else last)
    if rate is not None or not data.segments:
        return rate
    first, final = data.segments[0].times[0], data.segments[-1].times[-1]
    done = sum(gain(s.iterations[0], s.iterations[-1]) for s in data.segments)
    return done * 3600.0 / (final - first) if final > first and done else None


def _time_unit(seconds: float) -> tuple[str, float]:
    if seconds < 600:
        return "s", 1.0
    if seconds < 36000:
        return "min", 60.0
    return "h", 3600.0


def progress_title(data: ProgressData) -> str:
    """The plot's title: the chain, its runners, its rate (as chain status prints it)."""
    rate = format_rate(data.rate_per_hour) if data.rate_per_hour else "unknown"
    return f"chain {data.chain_id}: progress ({len(data.spans)} runners, rate {rate})"


def render_progress(data: ProgressData, *, dpi: int = 110) -> bytes:
    """Draw ``data``: the PNG's bytes (no global pyplot state is used; the
    caller writes them, through the chain directory's guard)."""
    fig = Figure(figsize=(9, 5), dpi=dpi)
    ax = fig.add_subplot(1, 1, 1)
    t0 = data.t0
    ends = [t for s in data.segments for t in s.times] + [s.end for s in data.spans]
    unit, scale = _time_unit((max(ends) - t0) if ends else 0.0)

    def x(t: float) -> float:
        return (t - t0) / scale

    _draw_allocations(ax, data, x)
    _draw_progress(ax, data, x)
    ax.axhline(data.max_iter, color="tab:red", linestyle="--", linewidth=1, label=f"MAX_ITER = {data.max_iter}")
    ax.set_xlabel(f"wall-clock time since chain start ({unit})")
    ax.set_ylabel("iteration (count)")
    ax.set_ylim(0, max(data.max_iter, *(max(s.iterations) for s in data.segments if s.iterations), 1) * 1.05)
    ax.set_xlim(left=0)
    ax.set_title(progress_title(data))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def _draw_allocations(ax: Axes, data: ProgressData, x: Callable[[float], float]) -> None:
    """Runner spans (shaded, labelled when few) and the gaps between them (hatched)."""
    for i, span in enumerate(data.spans):
        ax.axvspan(
            x(span.start),
            x(span.end),
            color="tab:blue" if i % 2 == 0 else "tab:cyan",
            alpha=0.12,
            label="runner allocation" if i == 0 else None,
        )
        ax.axvline(x(span.start), color="tab:blue", linewidth=0.6, alpha=0.5)
        if len(data.spans) <= 30:
            ax.annotate(
                f"r{span.seq}" if span.seq is not None else span.job,
                (x(span.start), 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                va="top",
                ha="left",
            )
    for i, (a, b) in enumerate(data.gaps):
        ax.axvspan(
            x(a),
            x(b),
            facecolor="none",
            hatch="//",
            edgecolor="tab:red",
            alpha=0.35,
            linewidth=0,
            label="queue / handoff gap" if i == 0 else None,
        )


def _draw_progress(ax: Axes, data: ProgressData, x: Callable[[float], float]) -> None:
    """The iteration curve of each segment and the checkpoints."""
    for i, seg in enumerate(data.segments):
        # the log has every save (a staircase); a record only the last: a rise to it, then flat
        ax.plot(
            [x(t) for t in seg.times],
            seg.iterations,
            color="tab:green",
            linewidth=1.4,
            drawstyle="steps-post" if data.source == "iterations.log" else "default",
            label="iteration" if i == 0 else None,
        )
    for i, (t0, t1, lo, hi) in enumerate(data.redone):
        ax.plot(
            [x(t0), x(t1)],
            [lo, hi],
            color="tab:red",
            linewidth=1.4,
            linestyle=":",
            label="computed past the last save, lost and redone" if i == 0 else None,
        )
    if data.checkpoints:
        ax.plot(
            [x(t) for t, _ in data.checkpoints],
            [i for _, i in data.checkpoints],
            linestyle="none",
            marker=".",
            markersize=4,
            color="black",
            label="checkpoint",
        )
