"""examples/python/ddp/train.py as four ranks (DDP over gloo on this machine,
started the way srun or torchrun start them: one process per rank with
RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; two ranks are the multi-node tests'):

* the stop signal reaching one rank alone stops all at the same step, all
  exit 99, rank 0 wrote the checkpoint and the counter, nobody hangs;
* resumed, the run ends bit-identical to an uninterrupted run of as many
  ranks (weights digest, every step's loss), each rank taking its own RNG
  state. With more than two ranks this holds through ``rank_order_mean``
  (DDP's own all-reduce sums in a bucket-layout order that a resume changes:
  with ``DDP_DEFAULT_ALLREDUCE=1`` this test fails on the weights digest).
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from chain.app import read_counter

from .conftest import EXAMPLES, PYTHON, child_env
from .test_torch_adapter import MISSING

TRAIN = EXAMPLES / "python" / "ddp" / "train.py"
STEPS, EVERY = 24, 8


@pytest.fixture(autouse=True)
def _torch_installed() -> None:
    if MISSING:
        pytest.fail(MISSING, pytrace=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_ranks(workdir: Path, world: int, **extra: str) -> list[int]:
    """Every rank to its end; their exit codes, rank order."""
    port = str(_free_port())
    procs = []
    for rank in range(world):
        env = child_env(
            MAX_ITER=str(STEPS),
            CHECKPOINT_EVERY=str(EVERY),
            CKPT_PATH="counter.txt",
            STEP_SECONDS="0",
            RANK=str(rank),
            WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            **extra,
        )
        procs.append(
            subprocess.Popen(
                [PYTHON, str(TRAIN)], cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
    codes = []
    for proc in procs:
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise AssertionError("a rank hung (a collective without its peer?)") from None
        codes.append(proc.returncode)
    return codes


def _losses(workdir: Path) -> dict[int, str]:
    """Rank 0's loss at each step (a step run again after a stop: its last row)."""
    rows = [line.split(",") for line in (workdir / "metrics.csv").read_text().splitlines()]
    return {int(step): loss for step, loss in rows}


@pytest.mark.heavy  # four torch processes at once
def test_a_stop_on_one_rank_stops_all_at_one_step_and_the_resume_is_bit_identical(tmp_path: Path) -> None:
    world = 4
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    whole.mkdir()
    parts.mkdir()
    assert _run_ranks(whole, world) == [0] * world
    assert read_counter(whole / "counter.txt") == STEPS

    # rank 1 alone gets SIGTERM after step 11: all stop at the boundary after it
    assert _run_ranks(parts, world, DDP_STOP_AT="1:11") == [99] * world
    assert read_counter(parts / "counter.txt") == 11  # rank 0 saved the agreed step
    logs = [(parts / f"train_rank{r}.log").read_text() for r in range(world)]
    assert all("exit 99 at step 11" in log for log in logs), logs
    assert not (parts / "weights.sha256").exists()

    assert _run_ranks(parts, world) == [0] * world
    assert (parts / "weights.sha256").read_text() == (whole / "weights.sha256").read_text()
    assert _losses(parts) == _losses(whole)
    assert sorted(_losses(whole)) == list(range(1, STEPS + 1))
