"""Run an app as several processes under torchrun on this machine (gloo), each
through chain's rank wrapper, as ``--launcher torchrun`` runs them; read each
rank's own end; find one rank's process to signal it alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from chain.jobs.launching import free_port, rank_wrapper, read_rank_ends

from .conftest import child_env


def torchrun(app: Path, workdir: Path, world: int, **extra: str) -> subprocess.Popen[str]:
    """``world`` processes of ``app`` in ``workdir`` (rank records in ``workdir/ranks``)."""
    (workdir / "ranks").mkdir(exist_ok=True)
    for old in (workdir / "ranks").iterdir():
        old.unlink()
    env = child_env(CKPT_PATH=str(workdir / "state_iter.txt"), CHAIN_RANKS_DIR=str(workdir / "ranks"), **extra)
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={world}"]
    argv += ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", str(rank_wrapper()), str(app)]
    return subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def rank_ends(workdir: Path, run: subprocess.Popen[str], world: int) -> dict[int, int]:
    """Each rank's exit code as chain's rank wrapper recorded it, once the run has ended (torchrun's
    own code is no guide: a gloo worker that finished may abort in its teardown)."""
    run.wait(timeout=300)
    out = run.stdout.read() if run.stdout else ""
    records = [json.loads(p.read_text()) for p in (workdir / "ranks").glob("rank-*.json")]
    assert len(records) == world, out
    return {r["rank"]: r["exit_code"] for r in records}


def rank_notes(workdir: Path, world: int) -> dict[int, tuple[int | None, bool | None]]:
    """Each rank's last step and whether its checkpoint was committed, as chain.app's adapter noted
    them and the runner reads them (beside the rank wrapper's records)."""
    return {end.rank: (end.step, end.saved) for end in read_rank_ends(workdir / "ranks", world)}


def rank_pid(launcher: int, rank: str) -> int | None:
    """The pid of the worker of ``launcher`` whose RANK is ``rank``."""
    children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    for pid in children:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ:
            return int(pid)
    return None


def stop_one_rank(run: subprocess.Popen[str], steps_done: Callable[[], int], rank: str = "1", after: int = 4) -> None:
    """Once ``steps_done()`` reaches ``after``, SIGTERM the worker of ``rank`` alone (the others
    must stop with it at one step, not hang in the next collective)."""
    deadline = time.monotonic() + 120
    while steps_done() < after:
        assert time.monotonic() < deadline and run.poll() is None, "no steps"
        time.sleep(0.2)
    pid = rank_pid(run.pid, rank)
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
