"""``chain status`` for people: a header, progress bar, jobs, runner table.

Text that comes from the chain (reasons, names, paths) is printed
literally: a ``[`` in an app's error message is not rich markup.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from chain.api.listing import ChainRow
from chain.api.status import FailureOutput, StatusReport
from chain.core.timefmt import format_duration

_STATE_STYLE = {
    "completed": "bold green",
    "running": "bold cyan",
    "pending": "yellow",
    "failed": "bold red",
    "stopped": "bold red",
    "cancelled": "magenta",
}


def _clock(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) if ts else "-"


def progress_line(report: StatusReport) -> str:
    """One line: state, counter, current runner."""
    line = f"{report.state.value} {report.iteration}/{report.max_iter}"
    if report.runner_job_id:
        phase = report.current_runner.status.value if report.current_runner else "submitted"
        line += f", runner {report.current_runner_number} job {report.runner_job_id} {phase}"
    if report.reason:
        line += f" ({report.reason})"
    return line


def print_status(report: StatusReport, *, history: int = 10, console: Console | None = None) -> None:
    """Print a status report (``chain.api.status_report``) for a person."""
    # emoji off: no ":name:" substitution in user text, and no emoji table to load
    out = console or Console(highlight=False, emoji=False)
    _print_header(out, report)
    _print_jobs(out, report)
    if report.runners and history:
        out.print(_runner_table(report, history))
    _print_hooks(out, report)
    _print_failure(out, report.failure)
    for path in report.outputs:
        out.print(Text(f"output: {path}"))
    out.print(Text(f"log: {report.log}"))


def _print_header(out: Console, report: StatusReport) -> None:
    state = report.state.value
    style = _STATE_STYLE.get(state, "")
    out.print(f"chain [bold]{escape(report.chain_id)}[/]  " + (f"[{style}]{escape(state)}[/]" if style else
                                                               escape(state))
              + f"  ({escape(report.backend)} backend)")
    if report.reason:
        out.print(Text(f"reason: {report.reason}"))
    done, total = report.iteration, report.max_iter
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(total, 1), completed=min(done, total), width=40),
                f"{done}/{total} ({100 * done / max(total, 1):.0f}%)")
    out.print(bar)
    metrics = report.metrics
    parts = []
    if metrics.get("rate_per_hour"):
        parts.append(f"rate {metrics['rate_per_hour']:.1f} it/h")
    if metrics.get("eta_seconds") is not None:
        parts.append(f"ETA {format_duration(metrics['eta_seconds'])}")
    if metrics.get("efficiency") is not None:
        parts.append(f"efficiency {100 * metrics['efficiency']:.0f}%")
    if parts:
        out.print("  ".join(parts))


def _print_jobs(out: Console, report: StatusReport) -> None:
    if report.mode == "relay":
        _print_relay(out, report)
    else:
        sub_state = f" ({report.submitter_state})" if report.submitter_state else ""
        out.print(Text(f"submitter: cycle {report.submitter_cycle}, job {report.submitter_job_id or '-'}{sub_state}"))
    if report.submitter_lost:
        gone = f"has ended ({report.submitter_state})" if report.submitter_state else "is gone from the scheduler"
        out.print(Text(f"the submitter job {gone} but the chain is {report.state.value}: nothing drives it. "
                       "Continue it with: chain submit --resume", style="bold yellow"))
    if report.runner_job_id:
        current = report.current_runner
        phase = current.status.value if current else "submitted"
        slurm = f" ({report.runner_state})" if report.runner_state else ""
        stop_at = f", stop signal at {_clock(current.stop_at)}" if current and current.stop_at else ""
        out.print(Text(f"runner: job {report.runner_job_id}{slurm}, {phase}{stop_at}"))
    if report.scheduler_error:
        out.print(Text(f"scheduler: {report.scheduler_error}", style="yellow"))


def _print_relay(out: Console, report: StatusReport) -> None:
    """Relay mode: no submitter; the queued successor, and a stall."""
    queued = f"job {report.next_job_id}" + (f" ({report.next_state})" if report.next_state else "") \
        if report.next_job_id else "none"
    out.print(Text(f"mode: relay (no submitter job); next runner: {queued}"))
    if report.relay_broken:
        out.print(Text(f"relay broken: {report.relay_broken}", style="bold yellow"))
    if report.stalled:
        out.print(Text("stalled: nothing queued; continue it with: chain submit --resume", style="bold yellow"))


def _runner_table(report: StatusReport, history: int) -> Table:
    rows = report.runners[-history:]
    table = Table(title=f"runners (last {len(rows)} of {report.runner_count or len(report.runners)})",
                  title_justify="left")
    for col in ("#", "job", "state", "exit", "counter", "start", "wall", "verdict / reason"):
        table.add_column(col)
    for r in rows:
        # Text cells: literal (no markup parse) and cheaper to measure than str
        table.add_row(*(Text(cell) for cell in (
            "" if r.seq is None else str(r.seq), r.job_id, r.state or "-",
            "" if r.exit_code is None else str(r.exit_code), f"{r.iter_before}->{r.iter_after}",
            _clock(r.start), format_duration(r.wall), f"{r.verdict}: {r.reason}")))
    return table


def _print_hooks(out: Console, report: StatusReport) -> None:
    for hook in report.hooks:
        if hook.get("skipped"):
            continue
        ok = hook.get("rc") == 0
        line = Text(f"hook {hook.get('name')}: ")
        line.append("ok" if ok else f"failed (exit {hook.get('rc')})", style="" if ok else "red")
        line.append(f"  log: {hook.get('log', '-')}")
        out.print(line)


def _print_failure(out: Console, failure: FailureOutput | None) -> None:
    """The failing runner's last output lines and where the rest is."""
    if failure is None:
        return
    out.print(Text(f"runner {failure.job_id} output: {failure.log}" + ("" if failure.tail else " (empty or missing)"),
                   style="bold"))
    for line in failure.tail:
        out.print(Text(f"  | {line}"), overflow="fold")


def print_chain_list(rows: list[ChainRow], *, console: Console | None = None) -> None:
    """``chain list`` for people: one row per chain (an empty table when none)."""
    out = console or Console(highlight=False, emoji=False)
    table = Table(title=f"{len(rows)} chain{'s' if len(rows) != 1 else ''}", title_justify="left")
    for col in ("directory", "chain", "mode", "state", "progress", "rate", "ETA", "reason"):
        table.add_column(col, overflow="fold")
    for r in rows:
        rate = f"{r.rate_per_hour:.1f}/h" if r.rate_per_hour else "-"
        eta = format_duration(r.eta_seconds) if r.eta_seconds is not None else "-"
        table.add_row(*(Text(cell) for cell in (r.directory, r.chain_id, r.mode, r.state,
                                                 f"{r.iteration}/{r.max_iter}", rate, eta, r.reason)))
    out.print(table)
