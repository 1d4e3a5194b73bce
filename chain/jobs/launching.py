"""The runner's side of a launch (``chain.core.launch``): the facts of its
allocation gathered, a fresh folder for the ranks' end records, and those
records read back (each may be anything: a rank wrote it) to judge the app by
(``chain.core.rankends``)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import chain.launch
from chain.core.launch import LaunchSite
from chain.core.rankends import MAX_RANKS, RankEnd, parse_rank_end, parse_rank_progress, with_progress
from chain.primitives import safeio
from chain.primitives.paths import RANK_PROGRESS
from chain.store import ChainDir

RECORD_CAP = 4096  # bytes of one rank's record read at most (they are about 80)
RANKS = "ranks"


def rank_wrapper() -> Path:
    """The script every launched worker runs through (shipped in the package)."""
    return Path(chain.launch.__file__).resolve().parent / "rank_run.py"


def free_port() -> str:
    """A TCP port free on this node (the first of the allocation, which serves
    the rendezvous) when asked; the launcher binds it a moment later."""
    import socket  # a launched runner's only: every runner imports this module

    with socket.socket() as sock:
        sock.bind(("", 0))
        return str(sock.getsockname()[1])


def gpus_on_node(environ: Mapping[str, str]) -> int:
    """Slurm's count of this node's GPUs for the job (0: none, or not a count)."""
    raw = environ.get("SLURM_GPUS_ON_NODE", "").strip()
    return int(raw) if raw.isdigit() and len(raw) < 6 else 0


def gather_site(job_id: str, environ: Mapping[str, str], *, srun: bool, rendezvous: bool) -> LaunchSite:
    """The facts a launch is composed from, on the runner's (first) node; a
    port is found only for a launch whose processes meet at one."""
    return LaunchSite(
        python=sys.executable,
        worker=str(rank_wrapper()),
        job_id=job_id,
        port=free_port() if rendezvous else "",
        gpus_on_node=gpus_on_node(environ),
        srun=srun,
    )


def fresh_ranks_dir(chain: ChainDir, job_id: str) -> Path:
    """An empty folder for this runner's rank records; earlier runners' are removed."""
    import shutil  # here: it loads compression modules a runner without a launcher does not need

    root = chain.root / RANKS
    with contextlib.suppress(FileNotFoundError):
        if root.is_symlink() or not root.is_dir():
            root.unlink()
        else:
            shutil.rmtree(root)
    folder = root / ("runner-" + "".join(c for c in job_id if c.isalnum() or c in "._-")[:64])
    folder.mkdir(parents=True, mode=0o777)
    return folder


def read_rank_ends(folder: Path, world: int) -> list[RankEnd]:
    """The records of ranks 0..world-1 found in ``folder``: a missing,
    unreadable or malformed one is simply absent (its rank is judged missing)."""
    ends: list[RankEnd] = []
    try:
        dir_fd = safeio.open_dir(folder)
    except OSError:
        return ends
    try:
        for rank in range(min(world, MAX_RANKS)):
            text = _read_one(dir_fd, f"rank-{rank}.json", folder)
            end = parse_rank_end(text) if text is not None else None
            if end is not None and end.rank == rank:
                noted = _read_one(dir_fd, RANK_PROGRESS.format(rank=rank), folder)
                ends.append(with_progress(end, parse_rank_progress(noted) if noted is not None else None))
    finally:
        os.close(dir_fd)
    return ends


def _read_one(dir_fd: int, name: str, folder: Path) -> str | None:
    try:
        fd = safeio.open_at(dir_fd, name, os.O_RDONLY, folder / name)
    except OSError:
        return None
    try:
        return safeio.read_capped(fd, RECORD_CAP, folder / name).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
