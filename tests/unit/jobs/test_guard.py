"""The app's guard (``chain.jobs.guard``) on real process groups: an app
that ignores its stop signal is killed after the grace; one that obeys is
only signalled; the guard, forked by a runner (a fresh single-threaded
Python here, as a runner job is), acts when that runner dies, outlives the
signals a scancel sends, holds none of the runner's descriptors, and goes
quietly when the runner releases it. And it follows
``chain.primitives.procs``' rule: a pid <= 1, the guard's own
process group or a leader whose start time is not the recorded one is never
signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chain.jobs.guard import App, stop_group, watch
from chain.primitives.procs import Proc, start_ticks


def _group(script: str) -> subprocess.Popen[bytes]:
    """A process group, reaped as soon as it exits (as init reaps an app
    whose runner died): a zombie would still count as alive."""
    proc = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


def _app(proc: subprocess.Popen[bytes]) -> App:
    """The app as the runner records it: its pid and start time."""
    return App(proc.pid, start_ticks(proc.pid))


def _gone(proc: subprocess.Popen[bytes], timeout: float = 10) -> bool:
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_an_app_ignoring_its_stop_signal_is_killed_after_the_grace() -> None:
    app = _group("trap '' TERM; sleep 300 & wait")
    time.sleep(0.3)
    assert stop_group(_app(app), 0.5, signal.SIGTERM) is True
    assert _gone(app)


def test_an_obeying_app_is_only_signalled() -> None:
    app = _group("trap 'exit 99' TERM; while true; do sleep 0.1; done")
    time.sleep(0.3)
    assert stop_group(_app(app), 10, signal.SIGTERM) is False
    assert _gone(app) and app.returncode == 99


# A runner in miniature: starts the app in a session of its own, forks its
# guard, says both pids and the guard's descriptors, then waits for a line:
# "release" (the app has ended) or nothing (it is killed meanwhile).
RUNNER = """
import os, signal, subprocess, sys
from chain.jobs.guard import start_guard
keep = os.open(os.devnull, os.O_RDONLY)  # a descriptor of the runner's own
app = subprocess.Popen(["bash", "-c", sys.argv[1]], start_new_session=True)
guard = start_guard(app.pid, float(sys.argv[2]), signal.SIGTERM)
print(app.pid, guard.pid, flush=True)
if sys.stdin.readline().strip() == "release":
    app.wait()
    guard.release()
    _, status = os.waitpid(guard.pid, 0)
    print("released", os.waitstatus_to_exitcode(status), flush=True)
    sys.stdin.readline()
"""


def _runner(app_script: str, grace: float = 0.5) -> tuple[subprocess.Popen[str], int, int]:
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, app_script, str(grace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert runner.stdout is not None
    app_pid, guard_pid = map(int, runner.stdout.readline().split())
    return runner, app_pid, guard_pid


def _ended(pid: int, timeout: float = 10) -> bool:
    """The process is gone, or a zombie (an orphan: its reaper is init)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        proc = Proc.read(pid)
        if proc is None or proc.zombie:
            return True
        time.sleep(0.05)
    return False


def _descriptors(pid: int, timeout: float = 5) -> list[str]:
    """The process's open descriptors, once it has closed what it closes at its start."""
    give_up = time.monotonic() + timeout
    while True:
        fds = sorted(os.listdir(f"/proc/{pid}/fd"))
        if fds == ["0", "1", "2"] or time.monotonic() > give_up:
            return fds
        time.sleep(0.05)


def _comm(pid: int, wanted: str, timeout: float = 5) -> str:
    """The process's name, once it is ``wanted`` or ``timeout`` has passed
    (the guard names itself after closing its descriptors: a loaded
    machine showed the forked runner's name in between)."""
    give_up = time.monotonic() + timeout
    while True:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        if name == wanted or time.monotonic() > give_up:
            return name
        time.sleep(0.05)


def test_the_guard_stops_the_app_when_its_runner_dies_and_outlives_a_scancel() -> None:
    runner, app, guard = _runner("trap '' TERM; sleep 300 & wait")
    try:
        assert _descriptors(guard) == ["0", "1", "2"], "the guard holds a runner's descriptor"
        assert _comm(guard, "chain-guard") == "chain-guard"
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            os.kill(guard, sig)  # a scancel signals every process of the job
        time.sleep(0.5)
        assert not _ended(guard, 0) and not _ended(app, 0), "the guard acted before the runner ended"
        runner.kill()  # the runner dies; the app ignores TERM
        assert _ended(app), "the app outlived its runner"
        assert _ended(guard)
        assert runner.stderr is not None and "outlived its runner" in runner.stderr.read()
    finally:
        if not _ended(app, 0):
            os.killpg(app, signal.SIGKILL)
        runner.kill()
        runner.wait()


def test_a_released_guard_exits_without_signalling_anything(tmp_path: Path) -> None:
    """The app's leader exits, leaving a process of its group behind: once
    the leader is gone its group number may be another's, so the released
    guard exits (0) and signals nothing."""
    left = tmp_path / "left"
    runner, _app, _guard = _runner(f"trap '' TERM; sleep 300 >/dev/null 2>&1 & echo $! > {left}; exit 0")
    try:
        assert runner.stdin is not None and runner.stdout is not None
        runner.stdin.write("release\n")
        runner.stdin.flush()
        assert runner.stdout.readline().split() == ["released", "0"]
        assert not _ended(int(left.read_text()), timeout=1), "the released guard signalled the group"
        runner.stdin.close()
        assert runner.wait(timeout=10) == 0
        assert runner.stderr is not None and "outlived" not in runner.stderr.read()
    finally:
        if left.exists():
            os.kill(int(left.read_text()), signal.SIGKILL)
        runner.kill()
        runner.wait()


@pytest.fixture
def signals_sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every os.kill / os.killpg with a real signal, recorded and not sent."""
    sent: list[tuple[str, int, int]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if sig == 0:  # only asks whether the pid exists
            real_kill(pid, 0)
        else:
            sent.append(("kill", pid, sig))

    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append(("killpg", pgid, sig)))
    return sent


def _own_ticks(pid: int) -> int | None:
    return start_ticks(pid)


@pytest.mark.parametrize(
    "which",
    ["pid 0", "pid 1", "pid -1", "a negative group", "its own process", "its own group", "no start time"],
)
def test_what_chain_did_not_start_is_never_signalled(which: str, signals_sent: list[tuple[str, int, int]]) -> None:
    """A bad pid in the guard's command line (0 would be killpg(0): the
    guard's own group; -N the group N) is refused by the one rule."""
    me, group = os.getpid(), os.getpgrp()
    app = {
        "pid 0": App(0, 1),
        "pid 1": App(1, _own_ticks(1)),
        "pid -1": App(-1, 1),
        "a negative group": App(-group, _own_ticks(group)),
        "its own process": App(me, _own_ticks(me)),
        "its own group": App(group, _own_ticks(group)),
        "no start time": App(me, None),
    }[which]
    assert stop_group(app, 0.2, signal.SIGTERM, sleep=lambda _: None) is False
    assert signals_sent == []


def test_a_leader_whose_start_time_does_not_match_is_never_signalled(
    signals_sent: list[tuple[str, int, int]],
) -> None:
    """The pid was reused since the runner started the app: another process now."""
    other = _group("sleep 300")
    try:
        time.sleep(0.2)
        ticks = start_ticks(other.pid)
        assert ticks is not None
        assert stop_group(App(other.pid, ticks + 1), 0.2, signal.SIGTERM) is False
        assert signals_sent == []
        assert other.poll() is None
    finally:
        other.kill()


def test_the_guard_of_a_reused_pid_leaves_its_group_alone() -> None:
    """The pid the guard watches now has another start time (reused): the
    pipe closes; the process at that pid lives on."""
    other = _group("trap '' TERM; sleep 300 & wait")
    try:
        time.sleep(0.3)
        ticks = start_ticks(other.pid)
        assert ticks is not None
        assert watch(App(other.pid, ticks + 1), 0.2, signal.SIGTERM, read=lambda: b"") is None
        assert other.poll() is None and not _gone(other, timeout=1)
    finally:
        os.killpg(other.pid, signal.SIGKILL)


def test_the_guard_reads_until_the_pipe_closes_then_stops_the_app() -> None:
    app = _group("trap '' TERM; sleep 300 & wait")
    chunks = [b"x", b"y", b""]
    time.sleep(0.3)
    said = watch(_app(app), 0.3, signal.SIGTERM, read=lambda: chunks.pop(0))
    assert chunks == [] and said is not None and "outlived its runner" in said
    assert _gone(app)
