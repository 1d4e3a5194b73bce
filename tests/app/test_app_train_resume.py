"""The user guide's resume test on examples/python/train.py.

Kill a run (SIGKILL) at a random step, restart it, and check that the loss
curve is continuous: every step's metric, including the steps recomputed
after the kill, equals the uninterrupted run's, and so does the final state.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from chain.app import CheckpointStore, read_counter

from .conftest import EXAMPLES, PYTHON, child_env

TRAIN = EXAMPLES / "python" / "train.py"
STEPS = 160


def env_for(**extra: str) -> dict[str, str]:
    base = {
        "MAX_ITER": str(STEPS),
        "CHECKPOINT_EVERY": "10",
        "CKPT_PATH": "counter.txt",
        "ITER_SECONDS": "0.002",
    }
    return child_env(**(base | extra))


def metrics(run_dir: Path) -> list[tuple[int, str]]:
    """(step, repr(loss)) for every complete line, in order written."""
    text = (run_dir / "metrics.log").read_text()
    lines = text.split("\n")[:-1]  # a line cut by the kill has no newline
    return [(int(a), b) for a, b in (ln.split() for ln in lines)]


def final_state(run_dir: Path) -> object:
    restored = CheckpointStore(run_dir / "checkpoints").restore(sync_counter=False)
    assert restored is not None and restored.info.step == STEPS
    return restored.state


def run_to_end(run_dir: Path) -> None:
    proc = subprocess.run([PYTHON, str(TRAIN)], cwd=run_dir, env=env_for(), timeout=60, check=False)
    assert proc.returncode == 0


def kill_at(run_dir: Path, step: int) -> None:
    proc = subprocess.Popen([PYTHON, str(TRAIN)], cwd=run_dir, env=env_for())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (run_dir / "metrics.log").exists() and metrics(run_dir) and metrics(run_dir)[-1][0] >= step:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, str], object]:
    ref = tmp_path_factory.mktemp("reference")
    run_to_end(ref)
    curve = metrics(ref)
    assert [s for s, _ in curve] == list(range(1, STEPS + 1))
    return dict(curve), final_state(ref)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_and_resumed_run_matches_uninterrupted(
    tmp_path: Path, reference: tuple[dict[int, str], object], seed: int
) -> None:
    curve, state = reference
    rng = random.Random(seed)
    kills = sorted(rng.sample(range(3, STEPS - 3), 2))
    for step in kills:
        kill_at(tmp_path, step)
    run_to_end(tmp_path)
    seen = metrics(tmp_path)
    # every step was computed, some twice (after a kill), always identically
    assert {s for s, _ in seen} == set(range(1, STEPS + 1))
    mismatched = [(s, v, curve[s]) for s, v in seen if curve[s] != v]
    assert not mismatched, mismatched[:3]
    assert len(seen) > STEPS  # the kills really cost recomputation
    assert final_state(tmp_path) == state
    assert read_counter(tmp_path / "counter.txt") == STEPS
    log = (tmp_path / "train_run.log").read_text()
    assert log.count("event=start") == 3 and "event=exit step=160 code=0" in log


def test_stop_signal_checkpoints_and_exits_99(tmp_path: Path) -> None:
    proc = subprocess.Popen([PYTHON, str(TRAIN)], cwd=tmp_path, env=env_for(ITER_SECONDS="0.01"))
    while not (tmp_path / "metrics.log").exists() or not metrics(tmp_path) or metrics(tmp_path)[-1][0] < 25:
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 99
    stopped_at = read_counter(tmp_path / "counter.txt")
    assert stopped_at is not None and stopped_at == metrics(tmp_path)[-1][0]  # nothing lost
    run_to_end(tmp_path)
    assert [s for s, _ in metrics(tmp_path)] == list(range(1, STEPS + 1))  # nothing redone


def test_termination_warning_exits_75_and_async_save(tmp_path: Path, podinfo: Path) -> None:
    env = env_for(ASYNC_SAVE="1", ITER_SECONDS="0.01") | {"CHAIN_PODINFO": str(podinfo)}
    proc = subprocess.Popen([PYTHON, str(TRAIN)], cwd=tmp_path, env=env)
    while not (tmp_path / "metrics.log").exists() or not metrics(tmp_path) or metrics(tmp_path)[-1][0] < 25:
        time.sleep(0.005)
    warn = podinfo / "termination-warning-at"
    warn.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30)))
    assert proc.wait(timeout=30) == 75
    stopped_at = read_counter(tmp_path / "counter.txt")
    assert stopped_at is not None and stopped_at == metrics(tmp_path)[-1][0]
    assert "warning=yes" in (tmp_path / "train_run.log").read_text()
    warn.write_text("")  # withdrawn
    proc2 = subprocess.run([PYTHON, str(TRAIN)], cwd=tmp_path, env=env, timeout=60, check=False)
    assert proc2.returncode == 0 and read_counter(tmp_path / "counter.txt") == STEPS
    assert [s for s, _ in metrics(tmp_path)] == list(range(1, STEPS + 1))
