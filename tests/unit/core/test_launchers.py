"""torchrun forwards only INT, TERM, HUP and QUIT to its workers:
``chain submit`` and ``chain render`` say so, in one line, when the app
command runs it as a program and the stop signal is another one; the submit
still goes ahead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend
from typer.testing import CliRunner

from chain.api import submission
from chain.cli.commands import app
from chain.core.launchers import torch_launcher, torchrun_signal_warning

CLEAN_ENV = {
    "CHAIN_BACKEND": "local",
    "MAX_ITER": None,
    "APP_CMD": None,
    "RUNNER_TIME_LIMIT": None,
    "RUNNER_MARGIN_SEC": None,
    "CHAIN_DIR": None,
    "CKPT_PATH": None,
    "CHAIN_STOP_SIGNAL": None,
}

LAUNCHED = {
    "torchrun --nproc-per-node 2 train.py": "torchrun",
    "srun torchrun --nproc-per-node 4 train.py": "torchrun",
    "srun -n 2 --gpus-per-task 4 torchrun train.py": "torchrun",  # an option's value before it
    "python -m torch.distributed.run --nproc_per_node 2 train.py": "python -m torch.distributed.run",
    "python3.11 -u -mtorch.distributed.launch train.py": "python -m torch.distributed.launch",
    "python -W ignore -m torch.distributed.run train.py": "python -m torch.distributed.run",
    "/opt/venv/bin/torchrun train.py": "torchrun",
    "cd run && NCCL_DEBUG=INFO torchrun train.py > log 2>&1": "torchrun",
    "module load cuda; torchrun train.py": "torchrun",
    "env OMP_NUM_THREADS=4 torchrun train.py": "torchrun",
    "uv run torchrun train.py": "torchrun",
    "bash -lc 'source env.sh && torchrun train.py'": "torchrun",
    "if true; then torchrun train.py; fi": "torchrun",
    "torchrun train.py\necho done": "torchrun",
    "torchrun 'unbalanced": "torchrun",  # the shell's error, not a traceback here
}
NOT_LAUNCHED = [
    "echo torchrun",  # an argument, not the program
    "TORCHRUN=1 python x.py",
    "python train.py --launcher torchrun",
    "python x.py > torchrun.log",
    "python -c 'import torch.distributed.run'",
    "python -m torch.distributed.runner x.py",
    "python3 train.py",
    "",
    "time " * 50 + "x",  # nested wrappers: no blow-up
]


@pytest.mark.parametrize("command", list(LAUNCHED))
def test_a_launcher_run_as_a_program_is_found(command: str) -> None:
    assert torch_launcher(command) == LAUNCHED[command]


@pytest.mark.parametrize("command", NOT_LAUNCHED)
def test_a_word_that_is_not_the_program_does_not_count(command: str) -> None:
    assert torch_launcher(command) is None


@pytest.mark.parametrize("sig", ["USR1", "SIGUSR2", "usr1", "ALRM"])
def test_a_signal_torchrun_does_not_forward_is_warned_about(sig: str) -> None:
    warning = torchrun_signal_warning("srun torchrun train.py", sig)
    assert warning is not None and "\n" not in warning
    assert "torchrun forwards only INT, TERM, HUP and QUIT" in warning
    assert "use --stop-signal TERM (or INT)" in warning
    assert f"--stop-signal {sig.upper().removeprefix('SIG')} " in warning


@pytest.mark.parametrize("sig", ["TERM", "INT", "HUP", "QUIT", "SIGTERM", "no-such-signal", ""])
def test_forwarded_or_unknown_signals_are_not(sig: str) -> None:
    assert torchrun_signal_warning("torchrun train.py", sig) is None


def test_no_launcher_no_warning() -> None:
    assert torchrun_signal_warning("python3 train.py", "USR1") is None


def _cli(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(app, argv, env=CLEAN_ENV)


def test_render_warns_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["render", "--app-cmd", "srun torchrun --nproc-per-node 2 train.py", "--stop-signal", "USR1"]
    result = _cli(argv, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        (
            "chain: --stop-signal USR1 with torchrun in --app-cmd: torchrun forwards only INT, TERM, HUP "
            "and QUIT to its workers, so they would never get USR1 and checkpoint; "
            "use --stop-signal TERM (or INT)"
        )
    ]
    assert "# ---- runner.sbatch ----" in result.stdout
    quiet = _cli(argv[:3], tmp_path, monkeypatch)  # the default TERM
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_submit_warns_and_still_submits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBackend()
    monkeypatch.setattr(submission, "make_backend", lambda name, chain_dir: fake)
    argv = [
        "submit",
        "--app-cmd",
        "python3 -m torch.distributed.run --nproc-per-node 1 train.py",
        "--stop-signal",
        "USR2",
        "--max-iter",
        "10",
        "--runner-time",
        "10:00",
    ]
    result = _cli(argv, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    [line] = [x for x in result.stderr.splitlines() if "forwards only" in x]
    assert line.startswith("chain: --stop-signal USR2 with python -m torch.distributed.run in --app-cmd")
    assert "submitter job" in result.stdout and fake.submitted  # it went ahead
