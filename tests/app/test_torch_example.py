"""examples/python/torch/train.py as a process, as a runner starts it.

* Stopped with SIGTERM at random steps, three times, and restarted: the
  metrics.csv (every step's loss, each step once) and the final checkpoint
  (weights, optimizer, scheduler, scaler, RNGs) equal an uninterrupted run's.
* SIGKILL inside a save (torch.save is wrapped to pause after writing the
  shard, before the DONE manifest; the test checks the kill landed there):
  the half-written checkpoint is never used, the run resumes from the
  previous one and completes, identical to the uninterrupted run.
"""

from __future__ import annotations

import random
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chain.app import read_counter

from .conftest import EXAMPLES, PYTHON, child_env
from .test_torch_adapter import MISSING, assert_same

if not MISSING:
    import torch

TRAIN = EXAMPLES / "python" / "torch" / "train.py"
EXAMPLE_NAMES = ("torch", "lightning")


def readme_line(name: str) -> list[str]:
    """The one `chain submit` line of examples/python/NAME/README.md, split."""
    lines = [
        ln
        for ln in (EXAMPLES / "python" / name / "README.md").read_text().splitlines()
        if ln.startswith("chain submit")
    ]
    assert len(lines) == 1, f"{name}: its README must hold exactly one `chain submit` line"
    return shlex.split(lines[0])


def flag(argv: list[str], name: str) -> int:
    return int(argv[argv.index(name) + 1])


# The README's sizes (16 batches an epoch): one reference run serves every test.
STEPS = flag(readme_line("torch"), "--max-iter")
EVERY = flag(readme_line("torch"), "--checkpoint-every")


@pytest.fixture(autouse=True)
def _torch_installed() -> None:
    if MISSING:
        pytest.fail(MISSING, pytrace=False)


def example_env(steps: int = STEPS, every: int = EVERY, **extra: str) -> dict[str, str]:
    base = {
        "MAX_ITER": str(steps),
        "CHECKPOINT_EVERY": str(every),
        "CKPT_PATH": "counter.txt",
        "STEP_SECONDS": "0",
    }
    return child_env(**(base | extra))


def rows(run_dir: Path) -> list[str]:
    path = run_dir / "metrics.csv"
    return path.read_text().splitlines()[1:] if path.exists() else []


def last_step(run_dir: Path) -> int:
    done = [ln for ln in rows(run_dir) if ln.count(",") == 1]
    return int(done[-1].split(",")[0]) if done else 0


def run_to_end(argv: list[str], run_dir: Path, env: dict[str, str], timeout: float = 120) -> None:
    proc = subprocess.run(argv, cwd=run_dir, env=env, timeout=timeout, check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def stop_at(argv: list[str], run_dir: Path, env: dict[str, str], step: int, signum: int = signal.SIGTERM) -> int:
    """Start the app, send ``signum`` once it logged ``step``; its exit code."""
    proc = subprocess.Popen(argv, cwd=run_dir, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while last_step(run_dir) < step:
        assert proc.poll() is None, f"exited {proc.returncode} before step {step}"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.01)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 99, err[-3000:]
    return proc.returncode


def interrupted_run(
    argv: list[str],
    run_dir: Path,
    seed: int,
    n: int,
    env_for: Callable[..., dict[str, str]],
    signals: tuple[int, ...] = (signal.SIGTERM,),
) -> list[int]:
    """Stop the app at ``n`` random steps, then run it to the end; the steps it stopped at."""
    rng = random.Random(seed)
    stopped = []
    for i, step in enumerate(sorted(rng.sample(range(3, STEPS - 10), n))):
        step = max(step, last_step(run_dir) + 1)
        stop_at(argv, run_dir, env_for(STEP_SECONDS="0.01"), step, signals[i % len(signals)])
        committed = read_counter(run_dir / "counter.txt")
        assert committed == last_step(run_dir), "a stop must commit every computed step"
        stopped.append(committed)
    run_to_end(argv, run_dir, env_for())
    return stopped


def final(run_dir: Path, name: str) -> dict[str, Any]:
    """The last checkpoint's file, loaded."""
    state: dict[str, Any] = torch.load(run_dir / "checkpoints" / f"ckpt-{STEPS:012d}.d" / name, weights_only=False)
    return state


_REFERENCES: dict[str, Path] = {}


@pytest.fixture(scope="session")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An uninterrupted run of each example (both at once), as its README sizes it.

    Cached here: the chain test module uses this fixture too, and pytest keeps
    one instance per module that defines (or imports) a fixture.
    """
    if MISSING:
        pytest.fail(MISSING, pytrace=False)
    try:
        import lightning  # noqa: F401 - the Lightning example's reference needs it
    except ImportError as exc:
        pytest.fail(f"{exc}; lightning is installed by `bash scripts/setup --dev`", pytrace=False)
    if _REFERENCES:
        return _REFERENCES
    procs = {}
    for name in EXAMPLE_NAMES:
        d = tmp_path_factory.mktemp(f"{name}-reference")
        env = example_env(steps=flag(readme_line(name), "--max-iter"))
        argv = [PYTHON, str(EXAMPLES / "python" / name / "train.py")]
        procs[name] = (d, subprocess.Popen(argv, cwd=d, env=env, stderr=subprocess.PIPE, text=True))
    for name, (d, proc) in procs.items():
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        steps = flag(readme_line(name), "--max-iter")
        assert [int(r.split(",")[0]) for r in rows(d)] == list(range(1, steps + 1))
    _REFERENCES.update({name: d for name, (d, _) in procs.items()})
    return _REFERENCES


@pytest.fixture
def reference(references: dict[str, Path]) -> Path:
    return references["torch"]


def test_stopped_at_random_steps_and_resumed_equals_uninterrupted(tmp_path: Path, reference: Path) -> None:
    stopped = interrupted_run([PYTHON, str(TRAIN)], tmp_path, 7, 3, example_env)
    assert len(set(stopped)) == 3 and stopped == sorted(stopped)
    # the loss curve, step by step, as text: each step once, each value bit-identical
    assert (tmp_path / "metrics.csv").read_text() == (reference / "metrics.csv").read_text()
    got, ref = final(tmp_path, "state.pt"), final(reference, "state.pt")
    assert_same(got["objects"], ref["objects"], "objects")
    assert_same(got["rng"], ref["rng"], "rng")
    log = (tmp_path / "train_run.log").read_text()
    assert log.count("start at step") == 4 and log.count("exit code 99") == 3


SLOW_SAVE = """
import os, runpy, sys, time
import torch
real_save = torch.save
saves = 0
def paused_save(obj, f, *args, **kwargs):
    global saves
    real_save(obj, f, *args, **kwargs)
    saves += 1
    if saves == int(os.environ["PAUSE_AT_SAVE"]):
        # published whole by a rename: the test reads it as soon as it exists
        with open(os.environ["PAUSE_MARKER"] + ".part", "w") as fh:
            fh.write(str(f))
        os.replace(os.environ["PAUSE_MARKER"] + ".part", os.environ["PAUSE_MARKER"])
        time.sleep(120)  # inside the save: shard written, no DONE manifest, counter not moved
torch.save = paused_save
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_sigkill_inside_a_save_falls_back_to_the_previous_checkpoint(tmp_path: Path, reference: Path) -> None:
    marker = tmp_path / "paused-in-save"
    env = example_env(PAUSE_AT_SAVE="3", PAUSE_MARKER=str(marker))
    third, second = 3 * EVERY, 2 * EVERY
    proc = subprocess.Popen([PYTHON, "-c", SLOW_SAVE, str(TRAIN)], cwd=tmp_path, env=env)
    deadline = time.monotonic() + 90
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    # Proof that the kill lands inside the third save: its shard is in the
    # save's scratch directory, nothing is published, the counter is the second's.
    shard = tmp_path / marker.read_text()  # relative to the app's working directory
    assert shard.parent.name.startswith(f".tmp-ckpt-{third:012d}.d.") and shard.is_file()
    assert not (shard.parent / "DONE").exists()
    assert not (tmp_path / "checkpoints" / f"ckpt-{third:012d}.d").exists()
    assert read_counter(tmp_path / "counter.txt") == second
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert last_step(tmp_path) == third  # the steps after the second save are lost

    run_to_end([PYTHON, str(TRAIN)], tmp_path, example_env())
    log = (tmp_path / "train_run.log").read_text()
    assert f"removed leftover temporary .tmp-ckpt-{third:012d}.d." in log
    assert f"resume: loaded ckpt-{second:012d}.d (step {second})" in log
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp-")]
    assert (tmp_path / "metrics.csv").read_text() == (reference / "metrics.csv").read_text()
    assert_same(final(tmp_path, "state.pt")["objects"], final(reference, "state.pt")["objects"])
