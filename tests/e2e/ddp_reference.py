"""The reference a chained run of examples/python/ddp/train.py must equal:
the same number of ranks on this machine, never stopped (``uninterrupted``),
and what is compared (``losses``, ``weights.sha256``)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from e2e_helpers import EXAMPLES

TRAIN = EXAMPLES / "python" / "ddp" / "train.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def losses(workdir: Path) -> dict[int, str]:
    """Rank 0's loss at every step (metrics.csv)."""
    rows = [line.split(",") for line in (workdir / "metrics.csv").read_text().splitlines()]
    return {int(step): loss for step, loss in rows}


def uninterrupted(workdir: Path, steps: int, world: int) -> Path:
    """``world`` ranks of train.py for ``steps`` steps, by hand, in ``workdir``."""
    shutil.copy(TRAIN, workdir / "train.py")
    port, procs = str(free_port()), []
    try:
        for rank in range(world):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CHAIN_"))}
            env.update(
                MAX_ITER=str(steps),
                CKPT_PATH="counter.txt",
                STEP_SECONDS="0",
                RANK=str(rank),
                WORLD_SIZE=str(world),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
                PYTHONPATH=str(EXAMPLES.parent),
            )
            procs.append(subprocess.Popen([sys.executable, "train.py"], cwd=workdir, env=env))
        assert [p.wait(timeout=300) for p in procs] == [0] * world
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return workdir


def references(tmp_path_factory: pytest.TempPathFactory, steps: int) -> Callable[[int], Path]:
    """For a module-scoped fixture: the uninterrupted run of N ranks, made once for each N asked for."""
    made: dict[int, Path] = {}

    def get(world: int) -> Path:
        if world not in made:
            made[world] = uninterrupted(tmp_path_factory.mktemp(f"whole{world}"), steps, world)
        return made[world]

    return get
