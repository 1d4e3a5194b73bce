#!/usr/bin/env python3
"""``chain list`` over a sweep's chain directories (1 000 in at most 1 s).

Builds N synthetic chain directories with chain's own classes (a third
completed, the rest running with a live counter file, each with 20 judged
runners), then times ``chain list DIR`` (wall time, median of 5 runs after a
warm-up) through the development install, as a user runs it into a pipe.
Needs no cluster: ``chain list`` reads each chain's own files and asks no
scheduler.

    .venv/bin/python bench/list.py [--chains 1000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
sys.path.insert(0, str(ROOT))


def build(work: Path, chains: int, runners: int = 20) -> None:
    from chain.core.model import ChainState
    from chain.core.resolution import resolve
    from chain.store import ChainDir, ChainStatus, write_json

    shutil.rmtree(work, ignore_errors=True)
    settings = resolve({"app_cmd": "python3 app.py", "max_iter": "1000", "backend": "slurm"}, {}, {}).to_json()
    t0 = time.time() - runners * 40
    for n in range(chains):
        run = work / f"lr{n:04d}"
        chain = ChainDir(run / ".chain")
        chain.create()
        write_json(chain.settings_file, settings)
        chain.runners_log.write_text(
            "".join(
                f'{{"job_id": "{n * 100 + i}", "seq": {i + 1}, "iter_before": {i * 10}, "iter_after": {i * 10 + 10}, '
                f'"start": {t0 + 40 * i}, "end": {t0 + 40 * i + 30}, "app_exit_code": 99, "verdict": "continue"}}\n'
                for i in range(runners)
            )
        )
        state = ChainState.COMPLETED if n % 3 == 0 else ChainState.RUNNING
        chain.save_status(
            ChainStatus(
                chain_id=f"chain-{n:06x}",
                state=state,
                workdir=str(run),
                backend="slurm",
                iteration=runners * 10,
                runner_seq=runners,
            )
        )
        (run / "state_iter.txt").write_text(f"{runners * 10 + 3}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1000)
    args = parser.parse_args()
    work = ROOT / "bench" / ".work" / "list"
    build(work, args.chains)
    chain = ROOT / ".venv" / "bin" / "chain"
    times = []
    for _ in range(6):
        start = time.perf_counter()
        out = subprocess.run([str(chain), "list", str(work)], capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - start)
    assert out.startswith(f"{args.chains} chains"), out[:200]
    median = statistics.median(times[1:])
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print("| chains | chain list (median of 5) | target | met | commit |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {args.chains} | {median:.2f} s | {TARGET_S:.1f} s | {'yes' if median <= TARGET_S else 'no'} | {commit} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
