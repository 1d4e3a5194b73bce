"""The Hugging Face adapter under two processes (torchrun on this machine, gloo):
a stop signal that reaches one process alone stops both at the same step,
after one save, each exiting 99; the resumed run ends with the losses of an
uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ._torchrun import rank_ends, rank_pid, torchrun

APP = Path(__file__).resolve().parent / "hf" / "train_hf.py"
STEPS = 30


def _torchrun(workdir: Path, **extra: str) -> subprocess.Popen[str]:
    return torchrun(APP, workdir, 2, MAX_ITER=str(STEPS), CHECKPOINT_EVERY="1000", **extra)


def _losses(path: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {row["step"]: row["loss"] for row in rows}


@pytest.mark.heavy  # two torch processes, three runs
def test_a_stop_reaching_one_process_stops_both_at_one_step_and_the_resume_is_exact(tmp_path: Path) -> None:
    whole, chained = tmp_path / "whole", tmp_path / "chained"
    whole.mkdir()
    chained.mkdir()
    assert rank_ends(whole, _torchrun(whole), 2) == {0: 0, 1: 0}

    first = _torchrun(chained, STEP_SECONDS="0.3")
    deadline = time.monotonic() + 120
    while not (chained / "loss.jsonl").exists() or len((chained / "loss.jsonl").read_text().splitlines()) < 4:
        assert time.monotonic() < deadline and first.poll() is None, "no steps"
        time.sleep(0.2)
    pid = rank_pid(first.pid, "1")
    assert pid is not None
    os.kill(pid, signal.SIGTERM)  # rank 1 alone: rank 0 must stop with it, not hang in the next step
    assert rank_ends(chained, first, 2) == {0: 99, 1: 99}
    stopped_at = int((chained / "state_iter.txt").read_text())
    assert 0 < stopped_at < STEPS and (chained / "out" / f"checkpoint-{stopped_at}").is_dir()
    assert max(_losses(chained / "loss.jsonl")) == stopped_at  # no step beyond the save on either process

    assert rank_ends(chained, _torchrun(chained), 2) == {0: 0, 1: 0}
    assert int((chained / "state_iter.txt").read_text()) == STEPS
    assert _losses(chained / "loss.jsonl") == _losses(whole / "loss.jsonl")
