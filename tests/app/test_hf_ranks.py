"""The Hugging Face adapter under two processes (torchrun on this machine, gloo):
a stop signal that reaches one process alone stops both at the same step,
after one save, each exiting 99; the resumed run ends with the losses of an
uninterrupted one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ._torchrun import rank_ends, rank_notes, stop_one_rank, torchrun

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
    log = chained / "loss.jsonl"
    stop_one_rank(first, lambda: len(log.read_text().splitlines()) if log.exists() else 0)
    assert rank_ends(chained, first, 2) == {0: 99, 1: 99}
    stopped_at = int((chained / "state_iter.txt").read_text())
    assert 0 < stopped_at < STEPS and (chained / "out" / f"checkpoint-{stopped_at}").is_dir()
    assert max(_losses(chained / "loss.jsonl")) == stopped_at  # no step beyond the save on either process
    assert rank_notes(chained, 2) == {0: (stopped_at, True), 1: (stopped_at, True)}  # as each noted for chain

    assert rank_ends(chained, _torchrun(chained), 2) == {0: 0, 1: 0}
    assert int((chained / "state_iter.txt").read_text()) == STEPS
    assert rank_notes(chained, 2) == {0: (STEPS, True), 1: (STEPS, True)}
    assert _losses(chained / "loss.jsonl") == _losses(whole / "loss.jsonl")
