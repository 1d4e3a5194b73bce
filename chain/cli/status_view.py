"""``chain status`` for people: a rich panel, progress bar and runner table."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from chain.core.timefmt import format_duration

_STATE_STYLE = {
    "completed": "bold green",
    "running": "bold cyan",
    "pending": "yellow",
    "failed": "bold red",
    "stopped": "bold red",
    "cancelled": "magenta",
}


def _clock(ts: Any) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) and ts else "-"


_ENDED_JOB = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
              "BOOT_FAIL", "DEADLINE"}


def submitter_lost(report: dict[str, Any]) -> bool:
    """The chain is not ended but its submitter job is (killed, or its
    successor could not be submitted), or the scheduler no longer knows it."""
    return report["state"] in ("running", "pending") and (
        report.get("submitter_state") in _ENDED_JOB or bool(report.get("nothing_driving")))


def current_runner_number(report: dict[str, Any]) -> int:
    """The live runner's sequence number: its own record's, else one past
    every judged runner (not past the ``--history`` rows shown)."""
    seq = (report.get("current_runner") or {}).get("seq")
    if isinstance(seq, int) and not isinstance(seq, bool):
        return seq
    return int(report.get("runner_count") or len(report.get("runners") or [])) + 1


def progress_line(report: dict[str, Any]) -> str:
    """One line: state, counter, current runner."""
    done, total = int(report["iteration"]), int(report["max_iter"])
    line = f"{report['state']} {done}/{total}"
    if report.get("runner_job_id"):
        phase = (report.get("current_runner") or {}).get("status", "submitted")
        line += f", runner {current_runner_number(report)} job {report['runner_job_id']} {phase}"
    if report.get("reason"):
        line += f" ({report['reason']})"
    return line


def print_status(report: dict[str, Any], *, history: int = 10, console: Console | None = None) -> None:
    """Print a status report (``api.status_report``) for a person.

    Text that comes from the chain (reasons, names, paths) is printed
    literally: a ``[`` in an app's error message is not rich markup.
    """
    # emoji off: no ":name:" substitution in user text, and no emoji table to load
    out = console or Console(highlight=False, emoji=False)
    state = report["state"]
    style = _STATE_STYLE.get(state, "")
    out.print(f"chain [bold]{escape(str(report['chain_id']))}[/]  "
              + (f"[{style}]{escape(state)}[/]" if style else escape(state))
              + f"  ({escape(str(report['backend']))} backend)")
    if report.get("reason"):
        out.print(Text(f"reason: {report['reason']}"))
    done, total = int(report["iteration"]), int(report["max_iter"])
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(total, 1), completed=min(done, total), width=40),
                f"{done}/{total} ({100 * done / max(total, 1):.0f}%)")
    out.print(bar)
    extra = report.get("metrics") or {}
    if extra:
        parts = []
        if extra.get("rate_per_hour"):
            parts.append(f"rate {extra['rate_per_hour']:.1f} it/h")
        if extra.get("eta_seconds") is not None:
            parts.append(f"ETA {format_duration(extra['eta_seconds'])}")
        if extra.get("efficiency") is not None:
            parts.append(f"efficiency {100 * extra['efficiency']:.0f}%")
        if parts:
            out.print("  ".join(parts))
    sub_state = f" ({report['submitter_state']})" if report.get("submitter_state") else ""
    out.print(Text(f"submitter: cycle {report['submitter_cycle']}, job {report['submitter_job_id'] or '-'}{sub_state}"))
    if submitter_lost(report):
        gone = f"has ended ({report['submitter_state']})" if report.get("submitter_state") else \
            "is gone from the scheduler"
        out.print(Text(f"the submitter job {gone} but the chain is {state}: nothing drives it. "
                       "Continue it with: chain submit --resume", style="bold yellow"))
    if report.get("runner_job_id"):
        current = report.get("current_runner") or {}
        phase = current.get("status", "submitted")
        slurm = f" ({report['runner_state']})" if report.get("runner_state") else ""
        out.print(Text(f"runner: job {report['runner_job_id']}{slurm}, {phase}"
                       + (f", stop signal at {_clock(current.get('stop_at'))}" if current.get("stop_at") else "")))
    if report.get("scheduler_error"):
        out.print(Text(f"scheduler: {report['scheduler_error']}", style="yellow"))
    runners = report.get("runners") or []
    if runners and history:
        table = Table(title=f"runners (last {min(history, len(runners))} of {report.get('runner_count', len(runners))})",
                      title_justify="left")
        for col in ("#", "job", "state", "exit", "counter", "start", "wall", "verdict / reason"):
            table.add_column(col)
        for r in runners[-history:]:
            wall = (r["end"] - r["start"]) if isinstance(r.get("end"), (int, float)) and isinstance(
                r.get("start"), (int, float)) else None
            # Text cells: literal (no markup parse) and cheaper to measure than str
            table.add_row(*(Text(cell) for cell in (
                str(r.get("seq", "")), str(r.get("job_id", "")), str(r.get("state") or "-"),
                str(r.get("exit_code", "")), f"{r.get('iter_before')}->{r.get('iter_after')}",
                _clock(r.get("start")), format_duration(wall), f"{r.get('verdict', '')}: {r.get('reason', '')}")))
        out.print(table)
    for hook in report.get("hooks") or []:
        if hook.get("skipped"):
            continue
        line = Text(f"hook {hook.get('name')}: ")
        line.append("ok" if hook.get("rc") == 0 else f"failed (exit {hook.get('rc')})",
                    style="" if hook.get("rc") == 0 else "red")
        line.append(f"  log: {hook.get('log', '-')}")
        out.print(line)
    _print_failure(out, report.get("failure"))
    for path in report.get("outputs") or []:
        out.print(Text(f"output: {path}"))
    out.print(Text(f"log: {report['log']}"))


def _print_failure(out: Console, failure: dict[str, Any] | None) -> None:
    """The failing runner's last output lines and where the rest is."""
    if not failure:
        return
    tail = failure.get("tail") or []
    out.print(Text(f"runner {failure.get('job_id')} output: {failure.get('log')}"
                   + ("" if tail else " (empty or missing)"), style="bold"))
    for line in tail:
        out.print(Text(f"  | {line}"), overflow="fold")
