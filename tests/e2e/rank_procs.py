"""The processes of a Slurm job's ranks on the multi-node dev cluster, found
through /proc (the nodes' namespaces share this pid namespace), and a stop
sent to one rank alone, as a node's own trouble would send it."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from waiting import wait_until

from chain.store import ChainDir


def steps_logged(path: Path, step: Callable[[str], int]) -> int:
    """The highest step in a log the ranks are still writing (absent: 0; a line being written: skipped)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return 0
    done = 0
    for line in lines:
        try:
            done = max(done, step(line))
        except (ValueError, KeyError, TypeError):
            continue
    return done


def _job_processes(job: str, *also: str) -> list[tuple[int, str, list[bytes]]]:
    """Every process, on any node, of Slurm job ``job`` with each of the variables ``also`` set
    (``NAME`` set, or ``NAME=VALUE`` exactly): its pid, command line and environment. The nodes'
    namespaces share this pid namespace, so /proc shows them all."""
    mark = f"SLURM_JOB_ID={job}".encode()
    exact = [name.encode() for name in also if "=" in name]
    named = [f"{name}=".encode() for name in also if "=" not in name]
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(bytes(1))  # a zombie's is empty: not running
            if (
                mark in environ
                and all(var in environ for var in exact)
                and all(any(var.startswith(name) for var in environ) for name in named)
            ):
                command = (proc / "cmdline").read_bytes().replace(bytes(1), b" ").decode()
                found.append((int(proc.name), command, environ))
        except OSError:  # gone meanwhile
            continue
    return found


def processes_of(job: str, *also: str) -> list[str]:
    """Every process of job ``job`` (see ``_job_processes``); one of its app (srun, the ranks, their
    children) has CHAIN_DEADLINE besides: the runner sets it for the app alone (not for chain's
    guard, which outlives the runner by design)."""
    return [f"{pid} {command}" for pid, command, _ in _job_processes(job, *also)]


def _rank_worker(job: str, rank: int) -> int | None:
    """The pid of rank ``rank``'s worker in job ``job``: chain's rank wrapper running the script."""
    found = [pid for pid, command, _ in _job_processes(job, f"RANK={rank}") if "rank_run" in command]
    return found[0] if found else None


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] not in ("Z", "X")
    except OSError:
        return False


def stop_one_rank(chained: Path, steps: Callable[[], int], after: int, rank: int, seen: set[str]) -> str:
    """Once the chain's next runner (one not in ``seen``) has taken ``after`` steps past the counter
    it started from, SIGTERM rank ``rank``'s worker alone, on whichever node it runs: the other
    ranks must stop with it at one step. The runner's job id; nothing is signalled when the runner
    ended first (it then took fewer than ``after`` steps)."""
    store = ChainDir(chained / ".chain")

    def next_worker() -> tuple[str, int, int] | None:
        status = store.load_status()
        job = status.runner_job_id if status is not None else None
        pid = _rank_worker(job, rank) if job and job not in seen else None
        if job is None or pid is None:
            return None
        counter = (chained / "state_iter.txt").read_text().strip() if (chained / "state_iter.txt").exists() else ""
        return job, pid, int(counter or 0)

    job, pid, base = wait_until(next_worker, 240, interval=0.3, what="the next runner's ranks at work")
    seen.add(job)
    wait_until(lambda: steps() >= base + after or not _alive(pid), 120, interval=0.2, what=f"{after} steps in {job}")
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
    return job
