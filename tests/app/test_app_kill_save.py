"""SIGKILL in the middle of a save, at a chosen byte (tests/app/_killsave.py),
with the torch adapter and the Hugging Face adapter: the counter stays at
the previous checkpoint (it moves only after a complete one), the ``glob:``
reader counts only complete checkpoints, the runner's resume check sets the
cut-short save aside, and the next run resumes from the previous checkpoint;
the counter never goes back. The adapters keep ``CHAIN_KEEP_CHECKPOINTS``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chain.app.atomic import read_counter
from chain.core.resolution import resolve
from chain.core.settings import Settings
from chain.jobs.verify import check_resume
from chain.store.counter import read_counter_state

from .conftest import EXAMPLES, child_env

KILLSAVE = Path(__file__).with_name("_killsave.py")
TORCH_APP = EXAMPLES / "python" / "torch" / "train.py"
HF_APP = Path(__file__).with_name("hf") / "train_hf.py"


def _glob(spec: str) -> Settings:
    return resolve({"app_cmd": "python3 train.py", "counter_cmd": spec}, {}, {})


def _run(app: Path, work: Path, env: dict[str, str], *, kill: tuple[str, int, int] | None = None) -> str:
    extra = dict(zip(("FAULT_KILL_FILE", "FAULT_KILL_SAVE", "FAULT_KILL_BYTE"), map(str, kill))) if kill else {}
    proc = subprocess.run(
        [sys.executable, str(KILLSAVE), str(app)],
        cwd=work,
        env=child_env(**env, **extra),
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    if kill is not None:
        assert proc.returncode == -9 and f"killed {kill[0]} " in proc.stdout, proc.stdout + proc.stderr[-3000:]
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("at_byte", [1, 3000])
def test_torch_adapter_killed_mid_save_resumes_from_the_previous_checkpoint(tmp_path: Path, at_byte: int) -> None:
    env = {"MAX_ITER": "40", "CKPT_PATH": "step.txt", "CHECKPOINT_EVERY": "10", "STEP_SECONDS": "0"}
    _run(TORCH_APP, tmp_path, env, kill=("state.pt", 3, at_byte))  # saves 10 and 20, killed saving 30
    assert read_counter(tmp_path / "step.txt") == 20
    spec = _glob("glob:checkpoints/ckpt-*")
    assert read_counter_state(spec, tmp_path).value == 20
    # the cut-short save is a scratch directory no glob matches: nothing to set aside
    assert check_resume(spec, tmp_path, when=1).lines == ()
    _run(TORCH_APP, tmp_path, {**env, "CHAIN_KEEP_CHECKPOINTS": "3"})
    starts = [line for line in (tmp_path / "train_run.log").read_text().splitlines() if "start at step" in line]
    assert [line.rsplit("start at step ", 1)[1].split()[0] for line in starts] == ["0", "20"]
    assert read_counter(tmp_path / "step.txt") == 40
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    newest = ["ckpt-000000000020.d", "ckpt-000000000030.d", "ckpt-000000000040.d"]
    assert kept[-3:] == newest and len(kept) <= 4, kept  # the last 3, and the best by its metric


def _losses(path: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("at_byte", [1, 20000])
def test_hf_adapter_killed_mid_save_resumes_from_the_previous_checkpoint(tmp_path: Path, at_byte: int) -> None:
    env = {"MAX_ITER": "12", "CKPT_PATH": "state_iter.txt", "CHECKPOINT_EVERY": "4"}
    _run(HF_APP, tmp_path, env, kill=("optimizer.pt", 2, at_byte))  # checkpoint-4 done, killed in checkpoint-8
    out = tmp_path / "out"
    assert (out / "checkpoint-4" / "DONE").is_file() and (out / "checkpoint-8" / "model.safetensors").is_file()
    assert read_counter(tmp_path / "state_iter.txt") == 4
    spec = _glob("glob:out/checkpoint-*")
    assert read_counter_state(spec, tmp_path).value == 4
    check = check_resume(spec, tmp_path, when=7)  # what the next runner does before the app starts
    assert check.lines == (
        (
            "checkpoint out/checkpoint-8 incomplete (no DONE: a save cut short): "
            "set aside as out/chain-set-aside/checkpoint-8.7; resuming from out/checkpoint-4"
        ),
    )
    logged = len(_losses(tmp_path / "loss.jsonl"))  # steps 1..8: the kill came in step 8's save
    _run(HF_APP, tmp_path, env)
    assert [int(r["step"]) for r in _losses(tmp_path / "loss.jsonl")[logged:]] == list(range(5, 13))
    assert read_counter(tmp_path / "state_iter.txt") == 12 == read_counter_state(spec, tmp_path).value
    assert sorted(p.name for p in out.iterdir()) == ["chain-set-aside", "checkpoint-12", "checkpoint-8"]
