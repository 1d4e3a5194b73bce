"""The example apps (Bash, Python, R) run directly as processes, no Slurm.

Sent their stop signal mid-run they checkpoint and exit 99; rerun, they
resume and reach MAX_ITER with exit 0; the iteration log shows every
iteration computed exactly once.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from waiting import wait_until

from chain.app import read_counter

from .conftest import EXAMPLES, HELPERS, PYTHON, child_env

MAX_ITER = 40
EVERY = 4


@dataclass(frozen=True)
class Example:
    name: str
    argv: list[str]
    stop_signal: signal.Signals


EXAMPLE_APPS = [
    Example("bash", ["bash", str(EXAMPLES / "bash" / "app.sh")], signal.SIGTERM),
    Example("python", [PYTHON, str(EXAMPLES / "python" / "app.py")], signal.SIGTERM),
    Example("python-int", [PYTHON, str(EXAMPLES / "python" / "app.py")], signal.SIGINT),
    Example("r", ["Rscript", str(EXAMPLES / "r" / "app.R")], signal.SIGINT),
]


@dataclass(frozen=True)
class Event:
    t: float
    kind: str
    iteration: int
    job: str
    pid: int
    code: int | None


def events(path: Path) -> list[Event]:
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        assert len(f) in (5, 6), line
        out.append(Event(float(f[0]), f[1], int(f[2]), f[3], int(f[4]), int(f[5]) if len(f) == 6 else None))
    return out


def app_env(ex: Example, **extra: str) -> dict[str, str]:
    base = {
        "MAX_ITER": str(MAX_ITER),
        "CHECKPOINT_EVERY": str(EVERY),
        "ITER_SECONDS": "0.05",
        "CKPT_PATH": "state_iter.txt",
        "CHAIN_ITER_LOG": "iterations.log",
        "CHAIN_STOP_SIGNAL": ex.stop_signal.name.removeprefix("SIG"),
    }
    return child_env(**(base | extra))


def wait_for_iteration(log: Path, n: int, proc: subprocess.Popen[bytes]) -> None:
    def reached() -> bool:
        assert proc.poll() is None, "the app exited early"
        return log.exists() and any(e.kind == "iter" and e.iteration >= n for e in events(log))

    wait_until(reached, 60, interval=0.01, what=f"the app to log iteration {n}")


def need(ex: Example) -> None:
    if shutil.which(ex.argv[0]) is None:  # a run without R must not show green
        pytest.fail(f"{ex.argv[0]} is not installed (scripts/setup --dev installs it)")


@pytest.mark.parametrize("ex", EXAMPLE_APPS, ids=lambda e: e.name)
def test_stop_signal_then_resume_to_max_iter(tmp_path: Path, ex: Example) -> None:
    need(ex)
    log = tmp_path / "iterations.log"
    first = subprocess.Popen(ex.argv, cwd=tmp_path, env=app_env(ex, SLURM_JOB_ID="101"))
    wait_for_iteration(log, 10, first)
    first.send_signal(ex.stop_signal)
    assert first.wait(timeout=30) == 99
    stopped = read_counter(tmp_path / "state_iter.txt")
    assert stopped is not None and 10 <= stopped < MAX_ITER

    second = subprocess.run(ex.argv, cwd=tmp_path, env=app_env(ex, SLURM_JOB_ID="102"), timeout=60, check=False)
    assert second.returncode == 0
    assert read_counter(tmp_path / "state_iter.txt") == MAX_ITER

    ev = events(log)
    assert [e.kind for e in ev if e.kind in ("start", "exit")] == ["start", "exit", "start", "exit"]
    starts = [e for e in ev if e.kind == "start"]
    exits = [e for e in ev if e.kind == "exit"]
    assert (starts[0].iteration, starts[1].iteration) == (0, stopped)
    assert (exits[0].iteration, exits[0].code) == (stopped, 99)
    assert (exits[1].iteration, exits[1].code) == (MAX_ITER, 0)
    assert [e.job for e in starts] == ["101", "102"] and starts[0].pid != starts[1].pid
    # every iteration computed exactly once: the stop committed all computed work
    assert [e.iteration for e in ev if e.kind == "iter"] == list(range(1, MAX_ITER + 1))
    ckpts = [e.iteration for e in ev if e.kind == "ckpt"]
    assert ckpts == sorted(ckpts) and stopped in ckpts and MAX_ITER in ckpts
    assert all(c % EVERY == 0 for c in ckpts if c not in (stopped, MAX_ITER))
    assert [e.t for e in ev] == sorted(e.t for e in ev)


@pytest.mark.parametrize("ex", [e for e in EXAMPLE_APPS if e.name != "python-int"], ids=lambda e: e.name)
def test_deadline_stops_voluntarily_with_99(tmp_path: Path, ex: Example) -> None:
    need(ex)
    # lead is ITER_SECONDS + 1: the app stops on its own ~1 s before the
    # deadline. The deadline leaves a slow start (R, a loaded machine) room to
    # compute; the app's own log says when it stopped, not the test's clock
    # after the interpreter's shutdown.
    lead = 0.05 + 1
    deadline = time.time() + 12  # R took over 6 s to start under load 11 (4 test workers + others)
    proc = subprocess.run(
        ex.argv,
        cwd=tmp_path,
        timeout=60,
        check=False,
        env=app_env(ex, CHAIN_DEADLINE=f"{deadline:.3f}", MAX_ITER="100000"),
    )
    assert proc.returncode == 99
    ev = events(tmp_path / "iterations.log")
    assert ev[-1].kind == "exit" and ev[-1].code == 99
    # it saved and logged its exit before the deadline, and not before its lead
    assert deadline - lead - 0.01 <= ev[-1].t < deadline, deadline - ev[-1].t
    assert read_counter(tmp_path / "state_iter.txt") == ev[-1].iteration > 0


@pytest.mark.parametrize("ex", [e for e in EXAMPLE_APPS if e.name != "python-int"], ids=lambda e: e.name)
def test_termination_warning_exits_75(tmp_path: Path, podinfo: Path, ex: Example) -> None:
    need(ex)
    (podinfo / "termination-warning-at").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30)))
    env = app_env(ex) | {"CHAIN_PODINFO": str(podinfo)}
    proc = subprocess.run(ex.argv, cwd=tmp_path, env=env, timeout=30, check=False)
    assert proc.returncode == 75


@pytest.mark.parametrize("ex", [e for e in EXAMPLE_APPS if e.name != "python-int"], ids=lambda e: e.name)
def test_garbage_counter_is_a_failure_not_a_restart(tmp_path: Path, ex: Example) -> None:
    need(ex)
    (tmp_path / "state_iter.txt").write_text("v2 iter 10")
    proc = subprocess.run(ex.argv, cwd=tmp_path, env=app_env(ex), timeout=30, check=False, capture_output=True)
    assert proc.returncode not in (0, 75, 99)
    assert (tmp_path / "state_iter.txt").read_text() == "v2 iter 10"


def test_readmes_hold_one_chain_submit_line() -> None:
    for lang, cmd in (
        ("bash", "bash app.sh"),
        ("python", "python3 app.py"),
        ("r", "Rscript app.R"),
    ):
        lines = [ln for ln in (EXAMPLES / lang / "README.md").read_text().splitlines() if ln.startswith("chain submit")]
        assert len(lines) == 1 and f"--app-cmd '{cmd}'" in lines[0]
        assert ("--stop-signal INT" in lines[0]) == (lang == "r")
    assert (HELPERS / "chain.sh").is_file() and (HELPERS / "chain.R").is_file()
