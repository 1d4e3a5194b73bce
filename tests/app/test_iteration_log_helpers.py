"""The one-line iteration-log helpers (lost work made visible):
``chain.app.log_iteration``, ``chain_log_iteration`` in chain.sh and
chain.R write lines ``chain report`` parses, so a killed-and-restarted app's
redone work is counted from them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from chain.app import log_iteration, shell_helpers_dir
from chain.reporting.metrics import parse_iteration_log, work_redone

# an app that computed 1..7, saved at 5, was killed; the next run resumed at 5 and went to 8
SEQUENCE = [
    ("start", 0, None),
    ("iter", 1, None),
    ("iter", 5, None),
    ("ckpt", 5, None),
    ("iter", 6, None),
    ("iter", 7, None),
    ("start", 5, None),
    ("iter", 6, None),
    ("iter", 7, None),
    ("iter", 8, None),
    ("exit", 8, 0),
]


def _check(log: Path, job: str) -> None:
    events = parse_iteration_log(log.read_text())
    assert [(e.event, e.iteration, e.code) for e in events] == SEQUENCE
    assert {e.job for e in events} == {job} and all(e.pid > 0 and e.time > 1.7e9 for e in events)
    redone = work_redone(events)
    assert (redone.iterations, redone.restarts) == (2, 1)  # 6 and 7 computed twice


def test_python_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("CHAIN_ITER_LOG", raising=False)
    for event, iteration, code in SEQUENCE:
        log_iteration(event, iteration, code)
    _check(tmp_path / "iterations.log", "77")
    with pytest.raises(ValueError, match="event must be one of"):
        log_iteration("iteration", 3)


def _script_lines(call: str, sep: str) -> str:
    return "\n".join(call.format(event=e, n=n, code="" if c is None else f"{sep}{c}") for e, n, c in SEQUENCE)


def test_bash_helper(tmp_path: Path) -> None:
    script = f'. "{shell_helpers_dir()}/chain.sh"\n' + _script_lines("chain_log_iteration {event} {n}{code}", " ")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        check=True,
        env=dict(env, CHAIN_ITER_LOG=str(tmp_path / "it.log")),
    )
    _check(tmp_path / "it.log", "-")


@pytest.mark.skipif(shutil.which("Rscript") is None, reason="R is not installed")
def test_r_helper(tmp_path: Path) -> None:
    calls = _script_lines("chain_log_iteration('{event}', {n}{code})", ", ")
    script = f'source("{shell_helpers_dir()}/chain.R")\n{calls}\n'
    subprocess.run(["Rscript", "-e", script], cwd=tmp_path, check=True, env=dict(os.environ, SLURM_JOB_ID="12"))
    _check(tmp_path / "iterations.log", "12")
