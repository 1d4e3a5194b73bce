"""Chain reports: usage table (``report/usage.csv``), totals
(``report/summary.json``) and the progress plot (``report/progress.png``).

Usable mid-chain or after; run by the built-in ``report`` hook at completion.
Slurm accounting (sacct) adds queue wait, elapsed, CPU time, node and MaxRSS;
without it (accounting disabled, local backend) the chain's own records fill
what they can and the Slurm columns stay empty.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

from chain.metrics import chain_metrics, parse_iteration_log, work_redone
from chain.state import ChainDir, write_json_atomic
from chain.usage import (
    COLUMNS,
    Run,
    SacctUsage,
    build_rows,
    fetch_usage,
    load_runners,
    usage_totals,
)

ITER_LOG = "iterations.log"


def _max_iter(chain: ChainDir) -> int:
    try:
        data = json.loads(chain.settings_file.read_text(encoding="utf-8"))
        value = data.get("max_iter") if isinstance(data, dict) else None
        return value if isinstance(value, int) else 0
    except (OSError, ValueError):
        return 0


def make_report(chain_dir: Path, *, echo: bool = True, run: Run | None = None,
                settle: float = 15.0) -> list[Path]:
    """Write the report files into ``<chain_dir>/report``; return their paths.

    ``run`` replaces the sacct subprocess call (tests); ``settle`` bounds the
    wait for sacct records of just-ended runners.
    """
    chain = ChainDir(Path(chain_dir))
    status = chain.load_status()
    chain_id = status.chain_id if status else chain.root.name
    backend = status.backend if status else ""
    workdir = Path(status.workdir) if status and status.workdir else chain.root.parent
    max_iter = _max_iter(chain)
    runners = load_runners(chain)
    iteration = status.iteration if status else max(
        [r["iter_after"] for r in runners if isinstance(r.get("iter_after"), int)], default=0)

    try:
        events = parse_iteration_log((workdir / ITER_LOG).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        events = []
    redone = work_redone(events) if events else None

    notes: list[str] = []
    acct: dict[str, SacctUsage] = {}
    ids = [str(r["job_id"]) for r in runners]
    if backend == "local":
        notes.append("accounting unavailable: the chain ran on the local backend; "
                     "usage from the chain's own records")
    elif ids:
        ended = [str(r["job_id"]) for r in runners if r.get("judged") or r.get("status") == "ended"]
        kwargs: dict[str, Any] = {"ended": ended, "settle": settle}
        if run is not None:
            kwargs["run"] = run
        acct, note = fetch_usage(ids, **kwargs)
        if note:
            notes.append(note + ("; usage from the chain's own records" if not acct else ""))

    rows = build_rows(runners, acct, redone.by_job if redone else None, now=time.time())
    totals = usage_totals(rows, redone.iterations if redone else None, redone.seconds if redone else None)
    chain.reports.mkdir(parents=True, exist_ok=True)
    csv_path = chain.reports / "usage.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    paths = [csv_path]

    submitted = [r["submitted"] for r in runners if isinstance(r.get("submitted"), (int, float)) and r["submitted"]]
    ends = [r["end"] for r in runners if isinstance(r.get("end"), (int, float))]
    summary: dict[str, Any] = {
        "chain_id": chain_id,
        "backend": backend,
        "state": status.state.value if status else "",
        "iteration": iteration,
        "max_iter": max_iter,
        "accounting": bool(acct),
        "notes": notes,
        "totals": totals,
        "work_redone": None if redone is None else {
            "iterations": redone.iterations, "seconds": round(redone.seconds, 3),
            "restarts_behind": redone.restarts, "by_job": redone.by_job},
        "span_s": round(max(ends) - min(submitted), 3) if ends and submitted else None,
        "metrics": chain_metrics(runners, iteration, max_iter, time.time()),
        "iteration_log": str(workdir / ITER_LOG) if events else None,
        "generated": time.time(),
        "files": {"usage": str(csv_path)},
    }

    png = chain.reports / "progress.png"
    try:
        from chain.plot import progress_data, render_progress

        data = progress_data(events, runners, max_iter=max_iter, chain_id=chain_id)
        paths.append(render_progress(data, png))
        summary["files"]["progress"] = str(png)
    except Exception as exc:  # noqa: BLE001  (a broken plot must not lose the usage report)
        notes.append(f"progress plot failed: {type(exc).__name__}: {exc}")

    summary_path = chain.reports / "summary.json"
    write_json_atomic(summary_path, summary)
    paths.insert(1, summary_path)
    if echo:
        _print(summary, rows)
    return paths


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print(summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    # markup off: notes (error messages) and the chain id are printed literally
    out = Console(highlight=False, markup=False, emoji=False)
    if not out.is_terminal:
        out.width = 150  # a hook's log file: do not squeeze the table to 80 columns
    for note in summary["notes"]:
        out.print(note, style="yellow", soft_wrap=True)
    table = Table(title=f"chain {summary['chain_id']}: usage ({summary['backend'] or '?'} backend; "
                  "times in s, RSS in MiB)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    heads = ("#", "job", "state", "exit", "node", "wait", "elapsed", "cpu", "rss", "counter", "useful",
             "lost", "stop→exit", "redone")
    for i, head in enumerate(heads):
        table.add_column(head, justify="right" if i >= 5 else "left")
    for r in rows:
        rss = r.get("max_rss_bytes")
        table.add_row(
            _fmt(r["seq"]), r["job_id"], _fmt(r["slurm_state"]), _fmt(r["slurm_exit_code"] or r["runner_exit_code"]),
            _fmt(r["node"]), _fmt(r["queue_wait_s"]), _fmt(r["allocated_s"]), _fmt(r["cpu_s"]),
            _fmt(rss / 2**20 if isinstance(rss, int) else None), f"{_fmt(r['iter_before'])}->{_fmt(r['iter_after'])}",
            _fmt(r["useful_s"]), _fmt(r["lost_s"]), _fmt(r["stop_to_exit_s"], 2), _fmt(r["redone_iterations"]),
        )
    t = summary["totals"]
    table.add_section()
    table.add_row("", "total", "", "", "", _fmt(t["queue_wait_s"]), _fmt(t["allocated_s"]), _fmt(t["cpu_s"]),
                  _fmt(t["max_rss_bytes"] / 2**20 if t["max_rss_bytes"] else None), _fmt(t["iterations"]),
                  _fmt(t["useful_s"]), _fmt(t["lost_s"]), _fmt(t["stop_to_exit_s"], 2), _fmt(t["redone_iterations"]))
    out.print(table)
    m = summary["metrics"]
    eff = t["efficiency"]
    out.print(f"allocated {t['allocated_s']:.0f} s = useful {t['useful_s']:.0f} s + lost to margins "
              f"{t['lost_s']:.0f} s" + (f" (efficiency {100 * eff:.0f}%)" if eff is not None else "")
              + f"; queue wait {t['queue_wait_s']:.0f} s"
              + (f"; rate {m['rate_per_hour']:,.0f} it/h" if m.get("rate_per_hour") else ""))
