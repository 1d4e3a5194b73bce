"""The printed report: ``chain report``'s table and lines (80 columns),
from the summary and the rows ``chain.reporting.report`` writes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from chain.core.timefmt import format_duration
from chain.reporting.metrics import format_rate

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def short_duration(seconds: Any) -> str:
    """Short duration: tenths under a minute (margins are seconds), else 1h02m;
    ``-`` when unknown. The report's and ``chain status``'s redone time."""
    if not isinstance(seconds, (int, float)):
        return "-"
    return f"{seconds:.1f}s" if abs(seconds) < 59.95 else format_duration(seconds)


def _percent(fraction: float) -> str:
    """One decimal, rounded down: 99.96 % efficiency is not 100.0 %."""
    return f"{math.floor(fraction * 1000 + 1e-9) / 10:.1f}%"


def _counter(before: Any, after: Any) -> str:
    if before is None and after is None:
        return "-"
    return f"{'?' if before is None else before}→{'?' if after is None else after}"


def driver_line(driver: dict[str, Any]) -> str:
    """Pure: the printed line for ``summary["driver"]`` (``DriverUsage.to_json``)."""
    jobs = driver["jobs"]
    head = f"driver: {jobs} submitter job{'s' if jobs != 1 else ''}"
    if not jobs:
        return head
    if not driver["accounted"]:
        return head + ", allocation unknown (no accounting record)"
    part = "" if driver["accounted"] == jobs else f" ({driver['accounted']} accounted)"
    if driver["cpu_s"] is None:
        elapsed = short_duration(driver["elapsed_s"])
        return head + part + f", {elapsed} elapsed; CPU-seconds unknown (no allocated CPUs recorded)"
    line = head + part + f" held {driver['cpu_s']:,.0f} CPU-s ({short_duration(driver['elapsed_s'])} elapsed)"
    if driver["ratio"] is not None:
        line += f" = {100 * driver['ratio']:.1f}% of the runners' {driver['runner_cpu_s']:,.0f} CPU-s"
    return line


def _table(summary: dict[str, Any], rows: list[dict[str, Any]]) -> Table:
    from rich import box
    from rich.table import Table

    # Ten short columns, one space apart (the box's blank divider, no
    # padding), fit 80 characters with 8-digit job ids, node names of 8-10,
    # 6-digit counters and day-long runners; the rest is in usage.csv and the
    # lines under the table. alloc = new work + redone + lost, row by row and
    # in total (the allocation line).
    table = Table(
        title=f"chain {summary['chain_id']}: {len(rows)} runner(s), {summary['backend'] or '?'} backend",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=0,
    )
    for i, head in enumerate(("#", "job", "node", "state", "exit", "counter", "wait", "alloc", "redone", "lost")):
        table.add_column(head, justify="right" if i >= 5 else "left", no_wrap=True)
    for r in rows:
        state = (r["slurm_state"] or "-").split(" ")[0]  # "CANCELLED by 0" -> "CANCELLED"
        code = r["runner_exit_code"] if r["runner_exit_code"] is not None else r["slurm_exit_code"]
        table.add_row(
            str(r["seq"] if r["seq"] is not None else "-"),
            r["job_id"],
            r["node"] or "-",
            state,
            "-" if code is None else str(code),
            _counter(r["iter_before"], r["iter_after"]),
            short_duration(r["queue_wait_s"]),
            short_duration(r["allocated_s"]),
            short_duration(r["redone_s"]),
            short_duration(r["lost_s"]),
        )
    t = summary["totals"]
    table.add_section()
    table.add_row(
        "",
        "total",
        "",
        "",
        "",
        f"+{t['iterations']}",
        short_duration(t["queue_wait_s"]),
        short_duration(t["allocated_s"]),
        short_duration(t["redone_s"]),
        short_duration(t["lost_s"]),
    )
    return table


def redone_line(redone: dict[str, Any], totals: dict[str, Any]) -> str:
    """Pure: the printed line for ``summary["work_redone"]``: known (the
    runners' work redone, the sum of the table's column, and any the
    iteration log counts for jobs that are not the chain's runners), or why not."""
    unknown = redone.get("unknown") or []
    if unknown:
        at_least = f" (≥ {redone['iterations']} it)" if redone.get("iterations") else ""
        who = ", ".join(unknown) if len(unknown) <= 3 else f"{unknown[0]}, … {unknown[-1]} ({len(unknown)})"
        # an app killed (or failed) lost what it computed since its last save: nothing says how much
        return f"redone unknown{at_least}: runner {who} killed or failed; see --progress-pattern"
    line = (
        f"redone {totals['redone_iterations']} it ({short_duration(totals['redone_s'])}), "
        f"from the {redone.get('source') or 'iterations.log'}"
    )
    elsewhere = (redone.get("iterations") or 0) - (totals["redone_iterations"] or 0)
    return line + (f"; {elsewhere} more by jobs not of this chain" if elsewhere > 0 else "")


def allocation_line(t: dict[str, Any]) -> str:
    """The allocation as a true sum: new work + redone work + lost = allocated
    (the efficiency is the new work's share); with the redone work unknown,
    useful + lost, and no efficiency claimed."""
    allocated, lost = short_duration(t["allocated_s"]), short_duration(t["lost_s"])
    if t["efficiency"] is None or t["redone_s"] is None:
        return f"allocated {allocated} = useful {short_duration(t['useful_s'])} + lost {lost} (efficiency unknown)"
    redone = min(t["redone_s"], t["useful_s"])
    new = short_duration(t["useful_s"] - redone)
    return (
        f"allocated {allocated} = new work {new} + redone {short_duration(redone)} + lost {lost} "
        f"(efficiency {_percent(t['efficiency'])})"
    )


def _lines(summary: dict[str, Any]) -> list[str]:
    t, m = summary["totals"], summary["metrics"]
    rss = t["max_rss_bytes"]
    state = summary["state"] or "?"
    lines = [
        f"state {state}"
        + (f" ({summary['reason']})" if summary.get("reason") else "")
        + f"; counter {summary['iteration']}/{summary['max_iter']}",
        allocation_line(t),
        f"queue wait {short_duration(t['queue_wait_s'])}; cpu {short_duration(t['cpu_s'])}; max RSS "
        + (f"{rss / 2**20:.0f} MiB" if rss else "-")
        + f"; stop→exit {short_duration(t['stop_to_exit_s'])}",
        redone_line(summary["work_redone"], t),
        driver_line(summary["driver"]),
    ]
    if summary.get("preempted"):
        jobs = summary["preempted"]
        lines.append(
            f"taken back by Slurm: {len(jobs)} runner(s) (job {', '.join(jobs[:5])}"
            f"{', …' if len(jobs) > 5 else ''}): preempted, or requeued after a lost node; "
            "not counted as failures"
        )
    if m.get("rate_per_hour") is not None:
        eta = m.get("eta_seconds")
        lines.append(
            f"rate {format_rate(m['rate_per_hour'])}" + (f", ETA {format_duration(eta)}" if eta is not None else "")
        )
    elif summary.get("mean_rate_per_hour") is not None:
        lines.append(f"mean rate {format_rate(summary['mean_rate_per_hour'])} over the chain's span")
    return lines


def print_report(summary: dict[str, Any], rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """The report for a terminal (80 columns) or a hook's log file."""
    from rich.console import Console

    # markup off: notes (error messages) and the chain id are printed literally
    out = console or Console(highlight=False, markup=False, emoji=False)
    for note in summary["notes"]:
        out.print(note, style="yellow")
    out.print(_table(summary, rows))
    for line in _lines(summary):
        out.print(line)
