"""The Hugging Face adapter under two processes (torchrun on this machine, gloo):
a stop signal that reaches one process alone stops both at the same step,
after one save, each exiting 99; the resumed run ends with the losses of an
uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chain.jobs.launching import free_port, rank_wrapper

from .conftest import child_env

APP = Path(__file__).resolve().parent / "hf" / "train_hf.py"
STEPS = 30


def _torchrun(workdir: Path, port: str, **extra: str) -> subprocess.Popen[str]:
    (workdir / "ranks").mkdir(exist_ok=True)
    for old in (workdir / "ranks").iterdir():
        old.unlink()
    env = child_env(
        MAX_ITER=str(STEPS),
        CKPT_PATH=str(workdir / "state_iter.txt"),
        CHECKPOINT_EVERY="1000",
        CHAIN_RANKS_DIR=str(workdir / "ranks"),
        **extra,
    )
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2"]
    argv += ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", str(rank_wrapper()), str(APP)]
    return subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _ends(workdir: Path, run: subprocess.Popen[str]) -> dict[int, int]:
    """Each rank's exit code as chain's rank wrapper recorded it, once the run has ended (torchrun's
    own code is no guide: a gloo worker that finished may abort in its teardown)."""
    run.wait(timeout=300)
    out = run.stdout.read() if run.stdout else ""
    records = [json.loads(p.read_text()) for p in (workdir / "ranks").iterdir()]
    assert len(records) == 2, out
    return {r["rank"]: r["exit_code"] for r in records}


def _losses(path: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {row["step"]: row["loss"] for row in rows}


def _rank_pid(launcher: int, rank: str) -> int | None:
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


@pytest.mark.heavy  # two torch processes, three runs
def test_a_stop_reaching_one_process_stops_both_at_one_step_and_the_resume_is_exact(tmp_path: Path) -> None:
    whole, chained = tmp_path / "whole", tmp_path / "chained"
    whole.mkdir()
    chained.mkdir()
    assert _ends(whole, _torchrun(whole, free_port())) == {0: 0, 1: 0}

    first = _torchrun(chained, free_port(), STEP_SECONDS="0.3")
    deadline = time.monotonic() + 120
    while not (chained / "loss.jsonl").exists() or len((chained / "loss.jsonl").read_text().splitlines()) < 4:
        assert time.monotonic() < deadline and first.poll() is None, "no steps"
        time.sleep(0.2)
    pid = _rank_pid(first.pid, "1")
    assert pid is not None
    os.kill(pid, signal.SIGTERM)  # rank 1 alone: rank 0 must stop with it, not hang in the next step
    assert _ends(chained, first) == {0: 99, 1: 99}
    stopped_at = int((chained / "state_iter.txt").read_text())
    assert 0 < stopped_at < STEPS and (chained / "out" / f"checkpoint-{stopped_at}").is_dir()
    assert max(_losses(chained / "loss.jsonl")) == stopped_at  # no step beyond the save on either process

    assert _ends(chained, _torchrun(chained, free_port())) == {0: 0, 1: 0}
    assert int((chained / "state_iter.txt").read_text()) == STEPS
    assert _losses(chained / "loss.jsonl") == _losses(whole / "loss.jsonl")
