"""``chain status`` and ``chain list`` for people.

A view is built once as items (lines of styled parts, a progress bar,
tables; ``chain.cli.table_layout`` lays out the tables). A terminal gets
them through rich (``chain.cli.rich_view``: colours, boxed tables); a pipe
or a file as plain text, without importing rich (``chain status`` starts in
0.25 s on 10 000 runners). Text that comes from the chain (reasons, names,
paths) is printed literally, never as markup, and with its control
characters spelled out (``printable``): a reason or an app's line read from
disk never sends an escape sequence to the user's terminal.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from chain.api.listing import ChainRow
from chain.api.status import METRICS_WINDOW, FailureOutput, StatusReport
from chain.cli.table_layout import Column, plain_table
from chain.core.names import runner_name
from chain.core.timefmt import format_duration
from chain.reporting.metrics import format_rate
from chain.reporting.printed import short_duration

if TYPE_CHECKING:
    from rich.console import Console

_STATE_STYLE = {
    "completed": "bold green",
    "running": "bold cyan",
    "pending": "yellow",
    "failed": "bold red",
    "stopped": "bold red",
    "cancelled": "magenta",
}
BAR_WIDTH = 40


@dataclass(frozen=True)
class Line:
    """One line of (text, rich style) parts; ``fold``: long lines of the
    app's output are folded, not wrapped at words."""

    parts: tuple[tuple[str, str], ...]
    fold: bool = False

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.parts)


@dataclass(frozen=True)
class Bar:
    done: int
    total: int


@dataclass(frozen=True)
class TableItem:
    title: str
    columns: list[Column]


Item = Line | Bar | TableItem


# C0 but tab, DEL, C1, and the Unicode line and paragraph separators
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """``text`` as a terminal may be shown it: each control character spelled
    out (``\\x1b``), never sent (an escape sequence in a reason or in an app's
    output could set the user's clipboard or title)."""
    return _UNPRINTABLE.sub(lambda found: repr(found.group())[1:-1], text)


def _printable(item: Item) -> Item:
    if isinstance(item, Line):
        return replace(item, parts=tuple((printable(text), style) for text, style in item.parts))
    if isinstance(item, TableItem):
        columns = [replace(column, cells=[printable(cell) for cell in column.cells]) for column in item.columns]
        return TableItem(printable(item.title), columns)
    return item


def _line(text: str, style: str = "", *, fold: bool = False) -> Line:
    return Line(((text, style),), fold=fold)


def _clock(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) if ts else "-"


def progress_line(report: StatusReport) -> str:
    """One line: state, counter, current runner."""
    line = f"{report.state.value} {report.iteration}/{report.max_iter}"
    if report.runner_job_id:
        phase = report.current_runner.status.value if report.current_runner else "submitted"
        line += f", {runner_name(report.current_runner_number, report.runner_job_id)} {phase}"
    if report.reason:
        line += f" ({report.reason})"
    return printable(line)


def print_status(report: StatusReport, *, history: int = 10, console: Console | None = None) -> None:
    """Print a status report (``chain.api.status_report``) for a person."""
    items: list[Item] = [*_header(report), *_jobs(report)]
    if report.runners and history:
        items.append(_runner_table(report, history))
    items += [*_hooks(report), *_failure(report.failure)]
    items += [_line(f"output: {path}") for path in report.outputs]
    items.append(_line(f"log: {report.log}"))
    show(items, console)


def show(items: list[Item], console: Console | None = None) -> None:
    """Through rich on a terminal (or into ``console``), else as plain text;
    either way with every control character spelled out."""
    items = [_printable(item) for item in items]
    if console is None and not sys.stdout.isatty():
        width = _plain_width()
        sys.stdout.write("".join(line + "\n" for item in items for line in plain_lines(item, width)))
        return
    from chain.cli.rich_view import render

    render(items, console)


def _plain_width() -> int:
    """As rich measures a console that is not a terminal: $COLUMNS, else 80."""
    try:
        return max(10, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return 80


def plain_lines(item: Item, width: int) -> list[str]:
    """An item as plain text (lines are not wrapped: paths stay whole)."""
    if isinstance(item, Line):
        return [item.text]
    if isinstance(item, Bar):
        filled = BAR_WIDTH * min(item.done, item.total) // max(item.total, 1)
        return [f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {bar_label(item)}"]
    return plain_table(item.title, item.columns, width)


def bar_label(bar: Bar) -> str:
    return f"{bar.done}/{bar.total} ({100 * bar.done / max(bar.total, 1):.0f}%)"


def _header(report: StatusReport) -> list[Item]:
    state = report.state.value
    items: list[Item] = [
        Line(
            (
                ("chain ", ""),
                (report.chain_id, "bold"),
                ("  ", ""),
                (state, _STATE_STYLE.get(state, "")),
                (f"  ({report.backend} backend)", ""),
            )
        )
    ]
    if report.reason:
        items.append(_line(f"reason: {report.reason}"))
    items.append(Bar(report.iteration, report.max_iter))
    metrics = report.metrics
    parts = []
    if metrics.get("rate_per_hour"):
        parts.append(f"rate {format_rate(metrics['rate_per_hour'])}")
    if metrics.get("eta_seconds") is not None:
        parts.append(f"ETA {format_duration(metrics['eta_seconds'])}")
    if metrics.get("efficiency") is not None:
        parts.append(f"efficiency {100 * metrics['efficiency']:.0f}%")
    elif metrics.get("redone_unknown"):  # a killed app lost work nobody saw: no efficiency claimed
        parts.append("redone work unknown")
    if redone := redone_phrase(report):
        parts.append(redone)
    if parts:
        items.append(_line("  ".join(parts)))
    return items


def redone_phrase(report: StatusReport) -> str:
    """The work the runners redid after a kill, in words ("redone 13
    iterations (4.8s)"), over the runners the metrics read; "" when none was
    redone or nothing tells (then "redone work unknown" is said)."""
    count = report.metrics.get("redone_iterations")
    if not count:
        return ""
    phrase = f"redone {count} iteration{'s' if count != 1 else ''} ({short_duration(report.metrics.get('redone_s'))})"
    if report.runner_count > METRICS_WINDOW:
        phrase += f" in the last {METRICS_WINDOW} runners"
    return phrase


def _jobs(report: StatusReport) -> list[Item]:
    items = _driving_jobs(report) if report.has_submitter else _relay_jobs(report)
    items += _never_started(report)
    if report.runner_job_id:
        current = report.current_runner
        phase = current.status.value if current else "submitted"
        slurm = f" ({report.runner_state})" if report.runner_state else ""
        stop_at = f", stop signal at {_clock(current.stop_at)}" if current and current.stop_at else ""
        name = runner_name(report.current_runner_number, report.runner_job_id)
        items.append(_line(f"{name}{slurm}, {phase}{stop_at}"))
    if report.scheduler_error:
        items.append(_line(f"scheduler: {report.scheduler_error}", "yellow"))
    if report.excluded_nodes:
        items.append(
            _line(
                f"excluded nodes: {', '.join(report.excluded_nodes)} (runners stalled or lost the "
                "node there; chain submit --resume --reset-excluded uses them again)",
                "yellow",
            )
        )
    return items


def _never_started(report: StatusReport) -> list[Item]:
    """Jobs Slurm failed before chain started in them: why the chain does not move."""
    if not report.never_started:
        return []
    ids = ",".join(report.never_started)
    slurm = "" if report.backend == "local" else f"; see sacct -j {ids} -o ExitCode (0:53: a log Slurm could not open)"
    line = f"{report.never_started_text} (no log){slurm}: is the chain directory writable where its jobs run?"
    return [_line(line, "bold yellow")]


def _driving_jobs(report: StatusReport) -> list[Item]:
    """A chain its submitter job drives: that job, and a word if it is gone."""
    sub_state = f" ({report.submitter_state})" if report.submitter_state else ""
    items: list[Item] = [
        _line(f"submitter: cycle {report.submitter_cycle}, job {report.submitter_job_id or '-'}{sub_state}")
    ]
    if report.submitter_lost:
        gone = f"has ended ({report.submitter_state})" if report.submitter_state else "is gone from the scheduler"
        items.append(
            _line(
                f"the submitter job {gone} but the chain is {report.state.value}: nothing drives it. "
                "Continue it with: chain submit --resume",
                "bold yellow",
            )
        )
    return items


def _relay_jobs(report: StatusReport) -> list[Item]:
    """A chain its runners drive: the queued next one, and what broke the relay."""
    if report.next_job_id:
        queued = f"job {report.next_job_id}" + (f" ({report.next_state})" if report.next_state else "")
    elif report.runner_state == "RUNNING" and not report.relay_broken:
        queued = "none yet (the running one is expected to complete the chain; queued if it does not)"
    else:
        queued = "none"
    items: list[Item] = [_line(f"mode: {report.mode.value} (no submitter job); next runner: {queued}")]
    if report.relay_broken:
        items.append(_line(f"relay broken: {report.relay_broken}", "bold yellow"))
    if report.cancelled_outside:
        items.append(
            _line(
                f"cancelled outside chain: {report.cancelled_outside}; nothing of it runs. "
                "Close it with: chain cancel, or continue it with: chain submit --resume",
                "bold yellow",
            )
        )
    elif report.stalled:
        items.append(_line("stalled: nothing queued; continue it with: chain submit --resume", "bold yellow"))
    return items


def _runner_table(report: StatusReport, history: int) -> TableItem:
    rows = report.runners[-history:]
    # keep: what goes last when the terminal is narrow (the number, the
    # counter and the verdict stay)
    spec = (("#", 9), ("job", 3), ("state", 5), ("exit", 2), ("counter", 9), ("start", 0), ("wall", 1))
    values = [
        [
            "" if r.seq is None else str(r.seq),
            r.job_id,
            r.state or "-",
            "" if r.exit_code is None else str(r.exit_code),
            f"{r.iter_before}->{r.iter_after}",
            _clock(r.start),
            format_duration(r.wall),
        ]
        for r in rows
    ]
    columns = [Column(header, [v[k] for v in values], keep=keep) for k, (header, keep) in enumerate(spec)]
    columns.append(Column("verdict / reason", [f"{r.verdict}: {r.reason}" for r in rows], kind="text", min_width=24))
    return TableItem(f"runners (last {len(rows)} of {report.runner_count or len(report.runners)})", columns)


def _hooks(report: StatusReport) -> list[Item]:
    items: list[Item] = []
    for hook in report.hooks:
        if hook.get("skipped"):
            continue
        ok = hook.get("rc") == 0
        items.append(
            Line(
                (
                    (f"hook {hook.get('name')}: ", ""),
                    ("ok" if ok else f"failed (exit {hook.get('rc')})", "" if ok else "red"),
                    (f"  log: {hook.get('log', '-')}", ""),
                )
            )
        )
    return items


def _failure(failure: FailureOutput | None) -> list[Item]:
    """The failing runner's last output lines and where the rest is."""
    if failure is None:
        return []
    empty = "" if failure.tail else " (empty or missing)"
    return [
        _line(f"{runner_name(failure.seq, failure.job_id)} output: {failure.log}{empty}", "bold"),
        *(_line(f"  | {line}", fold=True) for line in failure.tail),
    ]


def print_chain_list(rows: list[ChainRow], *, console: Console | None = None) -> None:
    """``chain list`` for people: one row per chain (an empty table when none)."""
    columns = [
        Column("directory", [r.directory for r in rows], kind="path"),
        Column("chain", [r.chain_id for r in rows], keep=3),
        Column("mode", [r.mode for r in rows], keep=0),
        Column("state", [r.state for r in rows]),
        Column("progress", [f"{r.iteration}/{r.max_iter}" for r in rows]),
        Column("rate", [format_rate(r.rate_per_hour) if r.rate_per_hour else "-" for r in rows], keep=1),
        Column("ETA", [format_duration(r.eta_seconds) if r.eta_seconds is not None else "-" for r in rows], keep=2),
        Column("reason", [r.reason for r in rows], kind="text", keep=4),
    ]
    show([TableItem(f"{len(rows)} chain{'s' if len(rows) != 1 else ''}", columns)], console)
