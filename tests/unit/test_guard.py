"""The app's guard (``chain.jobs.guard``) on real process groups: an app
that ignores its stop signal is killed after the grace; one that obeys is
only signalled; the guard acts when the runner's pipe closes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from chain.jobs.guard import stop_group


def _group(script: str) -> subprocess.Popen[bytes]:
    """A process group, reaped as soon as it exits (as init reaps an app
    whose runner died): a zombie would still count as alive."""
    proc = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


def _gone(proc: subprocess.Popen[bytes], timeout: float = 10) -> bool:
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_an_app_ignoring_its_stop_signal_is_killed_after_the_grace() -> None:
    app = _group("trap '' TERM; sleep 300 & wait")
    time.sleep(0.3)
    assert stop_group(app.pid, 0.5, signal.SIGTERM) is True
    assert _gone(app)


def test_an_obeying_app_is_only_signalled() -> None:
    app = _group("trap 'exit 99' TERM; while true; do sleep 0.1; done")
    time.sleep(0.3)
    assert stop_group(app.pid, 10, signal.SIGTERM) is False
    assert _gone(app) and app.returncode == 99


def test_the_guard_acts_when_the_pipe_closes_and_ignores_sigterm() -> None:
    app = _group("trap '' TERM; sleep 300 & wait")
    read_end, write_end = os.pipe()
    guard = subprocess.Popen(
        [sys.executable, "-m", "chain.jobs.guard", str(app.pid), "0.5", str(int(signal.SIGTERM))],
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
