"""examples/python/lightning/train.py under DDP: two processes under torchrun
on this machine (gloo), as ``--launcher torchrun`` runs them. A stop signal
that reaches one process alone stops both at the same step after one save,
each exiting 99 (``ChainCallback`` agrees through the strategy); resumed,
rank 0's loss at every step is the uninterrupted run's, bit for bit: the
checkpoint holds every rank's RNG states, not only rank 0's (the ranks draw
their own dropout and noise)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ._torchrun import rank_ends, rank_notes, stop_one_rank, torchrun
from .conftest import EXAMPLES

APP = EXAMPLES / "python" / "lightning" / "train.py"
STEPS = 30


def _run(workdir: Path, **extra: str) -> subprocess.Popen[str]:
    return torchrun(APP, workdir, 2, MAX_ITER=str(STEPS), CHECKPOINT_EVERY="1000", **extra)


def _losses(workdir: Path) -> dict[int, str]:
    rows = [line.split(",") for line in (workdir / "metrics.csv").read_text().splitlines()[1:]]
    return {int(step): loss for step, loss in rows}


@pytest.mark.heavy  # two lightning processes, three runs
def test_a_stop_reaching_one_rank_stops_both_at_one_step_and_the_resume_is_bit_identical(tmp_path: Path) -> None:
    whole, chained = tmp_path / "whole", tmp_path / "chained"
    whole.mkdir()
    chained.mkdir()
    assert rank_ends(whole, _run(whole, STEP_SECONDS="0"), 2) == {0: 0, 1: 0}
    assert sorted(_losses(whole)) == list(range(1, STEPS + 1))

    first = _run(chained, STEP_SECONDS="0.3")
    stop_one_rank(first, lambda: len(_losses(chained)) if (chained / "metrics.csv").exists() else 0)
    assert rank_ends(chained, first, 2) == {0: 99, 1: 99}
    stopped_at = int((chained / "state_iter.txt").read_text())
    assert 0 < stopped_at < STEPS
    assert max(_losses(chained)) == stopped_at  # no step beyond the save
    assert rank_notes(chained, 2) == {0: (stopped_at, True), 1: (stopped_at, True)}  # as each noted for chain

    assert rank_ends(chained, _run(chained, STEP_SECONDS="0"), 2) == {0: 0, 1: 0}
    assert int((chained / "state_iter.txt").read_text()) == STEPS
    assert rank_notes(chained, 2) == {0: (STEPS, True), 1: (STEPS, True)}
    assert _losses(chained) == _losses(whole)
