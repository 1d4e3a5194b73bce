"""One real chain on the dev cluster: the report's rows match sacct, the totals add up."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from chain.backends.slurm.parse import SACCT_USAGE_FIELDS, parse_sacct_usage

REPO = Path(__file__).resolve().parents[2]
FINAL = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")


def _chain_cmd() -> list[str]:
    exe = shutil.which("chain")
    return [exe] if exe else [sys.executable, "-m", "chain"]


def test_report_of_a_real_chain(slurm_cluster: Any, tmp_path: Path) -> None:
    shutil.copy(REPO / "examples" / "python" / "app.py", tmp_path / "app.py")
    env = dict(os.environ, ITER_SECONDS="0.5")
    started = time.monotonic()
    proc = subprocess.run(
        [
            *_chain_cmd(),
            "submit",
            "--max-iter",
            "30",
            "--app-cmd",
            "python3 app.py",
            "--checkpoint-every",
            "5",
            "--runner-time",
            "0:10",
            "--runner-margin",
            "3",
            "--poll-max",
            "10",
            "--wait",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chain = tmp_path / ".chain"
    state = json.loads((chain / "state.json").read_text())
    assert state["state"] == "completed", state
    report_hook = [h for h in state["hooks"] if h["name"] == "report"]
    assert report_hook and report_hook[0]["rc"] == 0, report_hook

    ids = (chain / "worker_ids.txt").read_text().split()
    assert len(ids) >= 3, ids
    # sacct's own answer, once every runner's record is final (records arrive asynchronously)
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(
            ["sacct", "-n", "-P", "-j", ",".join(ids), "-o", SACCT_USAGE_FIELDS],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        direct = parse_sacct_usage(out)
        if all(j in direct and direct[j].state.split()[0] in FINAL for j in ids) or time.monotonic() > deadline:
            break
        time.sleep(1)
    x_out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobIDRaw,State,ExitCode,ElapsedRaw"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    plain = {line.split("|")[0]: line.split("|")[1:] for line in x_out.splitlines() if line.strip()}

    with (chain / "report" / "usage.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["job_id"] for r in rows] == ids
    for row in rows:
        state_, code, elapsed = plain[row["job_id"]]
        assert (row["slurm_state"], row["slurm_exit_code"], float(row["elapsed_s"])) == (state_, code, float(elapsed))
        assert row["node"] == direct[row["job_id"]].node == slurm_cluster.node
        alloc = direct[row["job_id"]].alloc_cpus
        assert alloc is not None and int(row["alloc_cpus"]) == alloc >= 1
        assert float(row["allocated_s"]) == float(elapsed)
        assert abs(float(row["allocated_s"]) - float(row["useful_s"]) - float(row["lost_s"])) < 1e-6
        assert 0 <= float(row["useful_s"]) <= float(row["allocated_s"])
    assert rows[-1]["slurm_state"] == "COMPLETED" and rows[-1]["iter_after"] == "30"
    assert [r["iter_before"] for r in rows[1:]] == [r["iter_after"] for r in rows[:-1]]

    # the report hook's summary: the chain's final state, and its submitters beside its runners
    summary = json.loads((chain / "report" / "summary.json").read_text())
    t = summary["totals"]
    assert summary["accounting"] is True and t["runners"] == len(ids)
    assert abs(t["allocated_s"] - t["useful_s"] - t["lost_s"]) < 1e-6
    assert t["allocated_s"] == sum(float(r["elapsed_s"]) for r in rows)
    assert t["iterations"] == 30 and t["redone_iterations"] == 0
    assert (summary["state"], summary["reason"]) == ("completed", state["reason"]), summary["state"]
    assert summary["metrics"]["eta_seconds"] is None and summary["metrics"]["rate_per_hour"] is None
    assert summary["mean_rate_per_hour"] > 0
    submitters = (chain / "submitter_ids.txt").read_text().split()
    driver = summary["driver"]
    assert driver["job_ids"] == submitters and driver["accounted"] == len(submitters) >= 1
    assert driver["cpu_s"] > 0 and driver["runner_cpu_s"] > 0 and driver["ratio"] > 0
    assert (chain / "report" / "progress.png").stat().st_size > 10_000

    # chain report, printed for an 80-column reader: the driver line, the node on every runner
    shown = subprocess.run(
        [*_chain_cmd(), "report", "--chain-dir", str(chain)],
        cwd=tmp_path,
        env=dict(os.environ, COLUMNS="80"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = [line for line in shown.stdout.splitlines() if not line.startswith("wrote ")]  # the CLI's file list
    assert max(len(line) for line in lines) <= 80 and "…" not in shown.stdout, shown.stdout
    driver_line = re.compile(r"driver: (\d+) submitter jobs? held ([\d,]+) CPU-s")
    held = [m for m in map(driver_line.match, lines) if m]
    assert held and int(held[0].group(1)) == len(submitters) and int(held[0].group(2).replace(",", "")) > 0, (
        shown.stdout
    )
    for job_id in ids:
        assert any(job_id in line.split() and slurm_cluster.node in line.split() for line in lines), shown.stdout
    print(f"chain of {len(ids)} runners + report in {time.monotonic() - started:.1f} s")
