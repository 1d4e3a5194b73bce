"""The Hugging Face Trainer adapter (chain.app.hf): its decisions at a step
boundary and on resume, and a real chain of at least three runners of a user's
Trainer script (tests/app/hf/train_hf.py: a tiny GPT-2 from a config, CPU) on
the local backend, whose every step runs once with the loss of an
uninterrupted run (on Slurm: tests/e2e/test_ddp_chain_e2e.py, under
accelerate on two nodes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

try:
    from transformers import TrainerControl, TrainerState, TrainingArguments
except ImportError as exc:  # a missing install step fails, never skips
    pytest.fail(f"{exc}; transformers is installed by `bash scripts/setup --dev`", pytrace=False)

from chain.app.contract import AppEnv
from chain.app.hf import ChainTrainerCallback
from chain.app.stop import StopMonitor

from .conftest import child_env

APP = Path(__file__).resolve().parent / "hf" / "train_hf.py"


def _callback(tmp_path: Path, *, max_iter: int = 10, every: int = 4) -> tuple[ChainTrainerCallback, StopMonitor]:
    env = AppEnv.from_environ(
        {"MAX_ITER": str(max_iter), "CKPT_PATH": str(tmp_path / "state_iter.txt"), "CHECKPOINT_EVERY": "3"}
    )
    monitor = StopMonitor(tmp_path / "no-podinfo", deadline=None, signals=[signal.SIGUSR2])
    return ChainTrainerCallback(env, every=every, monitor=monitor), monitor


def _args(tmp_path: Path, **kw: Any) -> TrainingArguments:
    return TrainingArguments(output_dir=str(tmp_path / "out"), report_to="none", use_cpu=True, **kw)


def _step(cb: ChainTrainerCallback, args: TrainingArguments, step: int) -> TrainerControl:
    state, control = TrainerState(), TrainerControl()
    state.global_step = step
    cb.on_step_end(args, state, control)
    if control.should_save:
        cb.on_save(args, state, control)
    return control


def test_saves_on_schedule_and_stops_with_99_on_the_signal(tmp_path: Path) -> None:
    cb, monitor = _callback(tmp_path)
    args = _args(tmp_path, max_steps=10)
    saves = [step for step in range(1, 4) if _step(cb, args, step).should_save]
    assert saves == [] and not (tmp_path / "state_iter.txt").exists()
    assert _step(cb, args, 4).should_save  # CHECKPOINT_EVERY
    assert (tmp_path / "state_iter.txt").read_text().strip() == "4"
    monitor.request_stop(signal.SIGTERM)
    control = _step(cb, args, 5)
    assert control.should_save and control.should_training_stop
    assert (tmp_path / "state_iter.txt").read_text().strip() == "5"  # written in on_save only
    assert cb.exit_code == 99


def test_exit_0_at_max_iter_after_a_last_save(tmp_path: Path) -> None:
    cb, _ = _callback(tmp_path, max_iter=6, every=0)
    args = _args(tmp_path, max_steps=6)
    assert not _step(cb, args, 5).should_save
    assert _step(cb, args, 6).should_save
    assert cb.exit_code == 0 and (tmp_path / "state_iter.txt").read_text().strip() == "6"


def test_retention_keeps_at_least_two_and_three_beside_a_best_one(tmp_path: Path) -> None:
    cb, _ = _callback(tmp_path)
    for limit, metric, kept in ((None, None, 2), (1, None, 2), (5, None, 5), (None, "loss", 3), (2, "loss", 3)):
        args = _args(tmp_path, max_steps=10, save_total_limit=limit, metric_for_best_model=metric)
        cb.on_init_end(args, TrainerState(), TrainerControl())
        assert args.save_total_limit == kept, (limit, metric)


def test_resume_path_follows_the_counter_and_sets_later_saves_aside(tmp_path: Path) -> None:
    cb, _ = _callback(tmp_path)
    out = tmp_path / "out"
    for step in (4, 8, 12):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    # no counter: a fresh start, and the user's existing checkpoints are left alone
    assert cb.resume_path(str(out)) is None
    (tmp_path / "state_iter.txt").write_text("0\n")
    assert cb.resume_path(str(out)) is None
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-12", "checkpoint-4", "checkpoint-8"]
    (tmp_path / "state_iter.txt").write_text("8\n")
    assert cb.resume_path(str(out)) == str(out / "checkpoint-8")
    # checkpoint-12 was being written when the runner was killed: set aside, out of the rotation's sight
    assert sorted(p.name for p in out.iterdir()) == ["chain-incomplete", "checkpoint-4", "checkpoint-8"]
    assert [p.name.split(".")[0] for p in (out / "chain-incomplete").iterdir()] == ["checkpoint-12"]


def test_resume_path_names_a_missing_checkpoint_and_moves_nothing(tmp_path: Path) -> None:
    cb, _ = _callback(tmp_path)
    out = tmp_path / "out"
    (out / "checkpoint-12").mkdir(parents=True)
    (tmp_path / "state_iter.txt").write_text("4\n")
    with pytest.raises(FileNotFoundError, match="checkpoint-4 is missing"):
        cb.resume_path(str(out))
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-12"]


def test_only_the_main_process_moves_directories(tmp_path: Path) -> None:
    cb, _ = _callback(tmp_path)
    out = tmp_path / "out"
    for step in (4, 8):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    (tmp_path / "state_iter.txt").write_text("4\n")
    cb._main_process = False  # as on_init_end sets it for the Trainer's process 1, 2, ...
    assert cb.resume_path(str(out)) == str(out / "checkpoint-4")
    assert (out / "checkpoint-8").is_dir()


def _losses(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    """An uninterrupted run of the same script: the loss of every step."""
    work = tmp_path_factory.mktemp("hf-reference")
    env = child_env(MAX_ITER="120", CKPT_PATH="state_iter.txt", CHECKPOINT_EVERY="10")
    proc = subprocess.run(
        [sys.executable, str(APP)], cwd=work, env=env, capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {row["step"]: row["loss"] for row in _losses(work / "loss.jsonl")}


@pytest.mark.heavy  # transformers' import is ~7 s of CPU inside every runner
# on Slurm: the same script as a two-node accelerate chain of four processes
# (tests/e2e/test_ddp_chain_e2e.py), which covers what a one-process Slurm chain would
@pytest.mark.parametrize("backend", [pytest.param("local", marks=pytest.mark.local)])
def test_a_trainer_chain_of_three_runners_is_exact(
    backend: str, tmp_path: Path, reference: dict[int, float], request: pytest.FixtureRequest
) -> None:
    if backend == "slurm":
        request.getfixturevalue("slurm_cluster")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAIN_")}
    env.update(STEP_SECONDS="0.3", PYTHONPATH=str(APP.parents[3]))
    # 120 steps of >= 0.3 s are >= 36 s of work; a runner's window is 25 - 8 = 17 s: three runners at least
    submit = [
        sys.executable,
        "-m",
        "chain",
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "120",
        "--checkpoint-every",
        "10",
        "--app-cmd",
        f"{sys.executable} {APP}",
        "--runner-time",
        "0:25",
        "--runner-margin",
        "8",
        "--fixed-margin",
        "--poll-max",
        "10",
        "--wait",
    ]
    started = time.monotonic()
    proc = subprocess.run(submit, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    status = json.loads(
        subprocess.run(
            [sys.executable, "-m", "chain", "status", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}\n{status}"
    runners = status["runners"]
    assert len(runners) >= 3, runners
    assert all(r["exit_code"] in (99, 124) for r in runners[:-1]), runners
    rows = _losses(tmp_path / "loss.jsonl")
    steps = [row["step"] for row in rows]
    assert sorted(steps) == list(range(1, 121)), "every step once (no step redone, none skipped)"
    assert {row["step"]: row["loss"] for row in rows} == reference
    assert len({row["pid"] for row in rows}) == len(runners)
    assert time.monotonic() - started < 600
