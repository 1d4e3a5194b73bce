#!/usr/bin/env python3
"""The first step after a runner's start, with each way of launching the ranks.

examples/python/ddp/train.py (DDP over gloo, CPUs) as a one-runner chain on
the three-node dev cluster, launched each way chain knows:

- ``direct``: one process on one node (``--app-cmd 'python3 train.py'``);
- ``srun``: one task a node on two nodes (``--launch-mode srun``);
- ``torchrun 2x1`` / ``torchrun 2x2``: one torchrun a node on two nodes, one
  or two workers each (``--launcher torchrun --nproc-per-node N``);
- ``accelerate 2x1``: one ``accelerate launch`` a node on two nodes.

Measured per run, from chain's records and the app's own log (rank 0's
``start at step`` line, written once the process group is up and the
checkpoint restored, just before the first step):
that first step from the runner's start (runner record ``start``). Each configuration runs ``--rounds``
times (default 2) in rounds; the table shows the medians and the spread.

Not part of the test suite. Needs the dev cluster with three nodes (it never
reconfigures it) and torch, transformers and accelerate in the venv
(``bash scripts/setup --dev``):
    bash scripts/dev-cluster up --nodes 3; eval "$(bash scripts/dev-cluster env)"
    flock /work/cluster.lock .venv/bin/python bench/launchers.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from handoff import BENCH, git_commit, loadavg, log, machine, write_results

from chain.store import ChainDir

ROOT = BENCH.parent
TRAIN = ROOT / "examples" / "python" / "ddp" / "train.py"
PY = sys.executable
STEPS = 40
CONFIGS: dict[str, tuple[str, ...]] = {
    "direct": ("--nodes", "1", "--app-cmd", "python3 train.py"),
    "srun": ("--nodes", "2", "--launch-mode", "srun", "--ntasks-per-node", "1", "--app-cmd", "python3 train.py"),
    "torchrun 2x1": ("--nodes", "2", "--launcher", "torchrun", "--nproc-per-node", "1", "--app-cmd", "train.py"),
    "torchrun 2x2": ("--nodes", "2", "--launcher", "torchrun", "--nproc-per-node", "2", "--app-cmd", "train.py"),
    "accelerate 2x1": ("--nodes", "2", "--launcher", "accelerate", "--nproc-per-node", "1", "--app-cmd", "train.py"),
}
START_LINE = re.compile(r"^(\S+)Z train INFO rank 0 of \d+: start at step \d+ \(job (\d+)\)")


def chain(*args: str, cwd: Path, timeout: float = 120) -> str:
    env = {**os.environ, "PATH": f"{Path(PY).parent}:{os.environ['PATH']}"}
    env.update(STEP_SECONDS="0.2", GLOO_SOCKET_IFNAME="eth0")  # the dev cluster's nodes resolve nowhere
    done = subprocess.run(
        [PY, "-m", "chain", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"chain {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def first_steps(workdir: Path) -> dict[str, float]:
    """Rank 0's first step of each job (epoch seconds), from its log."""
    found: dict[str, float] = {}
    for line in (workdir / "train_rank0.log").read_text().splitlines():
        if m := START_LINE.match(line):
            stamp = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.UTC)
            found.setdefault(m.group(2), stamp.timestamp())
    return found


def run_one(name: str, flags: tuple[str, ...], workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    shutil.copy(TRAIN, workdir / "train.py")
    load = loadavg()
    common = ("--backend", "slurm", "--max-iter", str(STEPS), "--runner-time", "2:00", "--runner-margin", "10")
    chain("submit", *common, *flags, "--wait", cwd=workdir, timeout=600)
    report = json.loads(chain("status", "--json", cwd=workdir))
    job = report["runners"][0]["job_id"]
    record = ChainDir(workdir / ".chain").runner_record(job)
    step = first_steps(workdir).get(job)
    start = record.start if record else None
    return {
        "config": name,
        "state": report["state"],
        "job": job,
        "first_step_s": step - start if step and start else None,
        "load": [load, loadavg()],
    }


def table(runs: list[dict[str, Any]]) -> str:
    rows = ["| launch | runs | first step after the runner's start (s), median | min-max |", "|---|---|---|---|"]
    for name in CONFIGS:
        steps = [r["first_step_s"] for r in runs if r["config"] == name and r["first_step_s"] is not None]
        if not steps:
            rows.append(f"| {name} | 0 | - | - |")
            continue
        rows.append(f"| {name} | {len(steps)} | {statistics.median(steps):.1f} | {min(steps):.1f}-{max(steps):.1f} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=list(CONFIGS), help="configurations to run")
    args = parser.parse_args()
    scratch = BENCH / ".work" / time.strftime("launchers-%Y%m%d-%H%M%S")
    runs: list[dict[str, Any]] = []
    for n in range(args.rounds):
        for name in args.only:
            log(f"round {n + 1}: {name}")
            runs.append(run_one(name, CONFIGS[name], scratch / f"{n}-{name.replace(' ', '-')}"))
            log(f"  first step {runs[-1]['first_step_s']} s after the runner's start ({runs[-1]['state']})")
    results = {"machine": machine(), "commit": git_commit(), "steps": STEPS, "runs": runs}
    write_results(BENCH / "results", time.strftime("launchers-%Y-%m-%d"), results, table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
