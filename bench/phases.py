"""Where the jobs of one ``bench/sweep.py`` run spent their slots, phase by phase.

    python bench/phases.py bench/.work/<run>/round-<k>/<mode>-<N> [--seq K]

reads each chain directory of the run (the app's ``iterations.log``, and
for chain's modes ``.chain/runners.jsonl``) and asks sacct (slurmdbd, no
slurmctld RPC) for the jobs' start and end, then prints the median, first
and third quartile over the jobs of each phase: from the job's start to the
runner's first record and to the app's first line, the app's own time, and
from the app's last line to the runner's record of its end and to the job's
end. ``--seq K``: only the runners numbered K of each chain (relay: 1 hands
over, 2 completes the chain).

Slurm keeps a job's start and end in whole seconds, so a phase that ends or
starts at one carries up to a second of rounding, and the apps' 1 s
iterations keep the rounding from averaging out: compare one phase across
runs of the same mode, not a phase of one mode with another's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

PHASES = (
    "job start -> runner's first record",
    "job start -> app's first line",
    "app's first line -> its last",
    "app's last line -> runner's end record",
    "app's last line -> job end",
    "job elapsed",
)


def app_lines(run: Path) -> dict[str, tuple[float, float]]:
    """Each job's first and last line time in the apps' iteration logs."""
    span: dict[str, tuple[float, float]] = {}
    for log in run.glob("*/iterations.log"):
        for line in log.read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            t, job = float(fields[0]), fields[3]
            first, last = span.get(job, (t, t))
            span[job] = (min(first, t), max(last, t))
    return span


def runner_records(run: Path) -> dict[str, dict[str, Any]]:
    """Each runner job's record (chain's modes; none for dependency chains)."""
    records: dict[str, dict[str, Any]] = {}
    for path in run.glob("*/.chain/runners.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            records[str(record["job_id"])] = record
    return records


def slurm_times(ids: list[str]) -> dict[str, tuple[float, float]]:
    """Start and end of each job, from sacct (whole seconds)."""
    times: dict[str, tuple[float, float]] = {}
    for i in range(0, len(ids), 500):
        argv = ["sacct", "-X", "-n", "-P", "-j", ",".join(ids[i : i + 500]), "-o", "JobID,Start,End"]
        for line in subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines():
            job, start, end = line.split("|")
            times[job] = (datetime.fromisoformat(start).timestamp(), datetime.fromisoformat(end).timestamp())
    return times


def phases(run: Path, seq: int | None) -> dict[str, list[float]]:
    """Each phase's duration, a value a job."""
    apps, records = app_lines(run), runner_records(run)
    found: dict[str, list[float]] = {name: [] for name in PHASES}
    for job, (start, end) in slurm_times(sorted(apps)).items():
        record = records.get(job)
        if seq is not None and (record is None or record.get("seq") != seq):
            continue
        first, last = apps[job]
        found["job start -> app's first line"].append(first - start)
        found["app's first line -> its last"].append(last - first)
        found["app's last line -> job end"].append(end - last)
        found["job elapsed"].append(end - start)
        if record is not None and record.get("start") and record.get("end"):
            found["job start -> runner's first record"].append(record["start"] - start)
            found["app's last line -> runner's end record"].append(record["end"] - last)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="one mode's directory of a bench/sweep.py run")
    ap.add_argument("--seq", type=int, default=None, help="only the runners numbered SEQ of each chain")
    args = ap.parse_args()
    print(f"{args.run}{'' if args.seq is None else f' (runners {args.seq})'}")
    for name, values in phases(args.run, args.seq).items():
        if not values:
            continue
        q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
        print(f"  {name:40s} median {median:6.2f} s  (quartiles {q1:.2f}, {q3:.2f}; {len(values)} jobs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
