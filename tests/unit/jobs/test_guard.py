"""The app's guard (``chain.jobs.guard``) on real process groups: an app
that ignores its stop signal is killed after the grace; one that obeys is
only signalled; the guard acts when the runner's pipe closes. And it follows
``chain.primitives.procs``' rule: a pid <= 1, the guard's own
process group or a leader whose start time is not the recorded one is never
signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from chain.jobs.guard import App, guard_argv, stop_group
from chain.primitives.procs import start_ticks


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


def test_the_guard_acts_when_the_pipe_closes_and_ignores_sigterm() -> None:
    app = _group("trap '' TERM; sleep 300 & wait")
    read_end, write_end = os.pipe()
    guard = subprocess.Popen(
        guard_argv(app.pid, 0.5, signal.SIGTERM),
        stdin=read_end,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(read_end)
    time.sleep(0.5)
    guard.send_signal(signal.SIGTERM)  # as a scancel signals every process of the job
    time.sleep(0.5)
    assert guard.poll() is None and app.poll() is None, "the guard acted before the runner ended"
    os.close(write_end)  # the runner dies
    assert _gone(app)
    assert guard.wait(timeout=10) == 0
    assert b"outlived its runner" in (guard.stderr.read() if guard.stderr else b"")


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
    """End to end: the guard's command line names the pid with another start
    time; the pipe closes; the process at that pid lives on."""
    other = _group("trap '' TERM; sleep 300 & wait")
    read_end, write_end = os.pipe()
    try:
        time.sleep(0.3)
        argv = guard_argv(other.pid, 0.2, signal.SIGTERM)
        argv[-3] = str(int(argv[-3]) + 1)  # TICKS: another process's
        guard = subprocess.Popen(argv, stdin=read_end, stderr=subprocess.PIPE, start_new_session=True)
        os.close(read_end)
        os.close(write_end)
        assert guard.wait(timeout=10) == 0
        assert other.poll() is None and not _gone(other, timeout=1)
        assert b"outlived" not in (guard.stderr.read() if guard.stderr else b"")
    finally:
        os.killpg(other.pid, signal.SIGKILL)
