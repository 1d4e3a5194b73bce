"""Waiting for a child's exit (``chain.primitives.exitwait``): asleep in the
kernel until the exit where a pidfd exists, ``Popen.wait``'s polling where not."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from chain.primitives.exitwait import ExitWait


def _has_pidfd() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


@pytest.fixture(params=["pidfd", "polling"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pidfd" and not _has_pidfd():
        pytest.skip("no pidfd on this host: the polling case covers it")
    if request.param == "polling":

        def refused(pid: int, flags: int = 0) -> int:
            raise OSError(errno.ENOSYS, "Function not implemented")

        monkeypatch.setattr(os, "pidfd_open", refused)
    return str(request.param)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_an_exit_ends_the_wait_with_the_child_reaped(mode: str) -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    exited = ExitWait(proc)
    assert exited.polls is (mode == "polling")
    started = time.monotonic()
    assert exited.wait(30.0)
    assert time.monotonic() - started < 10.0
    exited.close()
    assert proc.returncode == 3
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)  # reaped: no zombie left


def test_a_live_child_times_the_wait_out_then_its_kill_ends_the_next(
    mode: str, sleeper: subprocess.Popen[bytes]
) -> None:
    exited = ExitWait(sleeper)
    started = time.monotonic()
    assert not exited.wait(0.2)
    assert time.monotonic() - started >= 0.19
    assert sleeper.returncode is None
    sleeper.kill()
    assert exited.wait(30.0)
    exited.close()
    assert sleeper.returncode == -9


def test_the_pidfd_wait_sleeps_instead_of_polling(
    mode: str, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point of it: no look at the child while it runs (Popen.wait(timeout) looks every 50 ms)."""
    looks: list[int] = []
    real = os.waitpid

    def counted(pid: int, options: int) -> tuple[int, int]:
        looks.append(pid)
        return real(pid, options)

    monkeypatch.setattr(os, "waitpid", counted)
    exited = ExitWait(sleeper)
    assert not exited.wait(0.3)
    exited.close()
    assert (len(looks) == 0) is (mode == "pidfd"), looks


def test_a_reaped_child_has_exited_and_close_releases_the_pidfd(mode: str) -> None:
    proc = subprocess.Popen(["true"])
    exited = ExitWait(proc)
    fd = exited._fd
    assert exited.wait(30.0) and exited.wait(0.0)  # asked again: still exited
    exited.close()
    exited.close()  # twice: harmless
    if fd is not None:
        with pytest.raises(OSError):
            os.fstat(fd)
    proc.wait()
    assert ExitWait(proc).wait(0.0)  # made after the reaping: exited, no pidfd needed


def test_any_timeout_is_taken(mode: str, sleeper: subprocess.Popen[bytes]) -> None:
    """A negative one is no wait, an endless one (past poll's 25 days) waits for the exit."""
    exited = ExitWait(sleeper)
    started = time.monotonic()
    assert not exited.wait(-1.0)
    assert time.monotonic() - started < 5.0
    sleeper.kill()
    assert exited.wait(float("inf"))
    exited.close()


def test_a_pidfd_closed_behind_its_back_falls_back_to_popens_wait(sleeper: subprocess.Popen[bytes]) -> None:
    """poll's word on a descriptor that is no longer open is not an exit: the
    wait neither returns at once for good nor blocks past its timeout."""
    if not _has_pidfd():
        pytest.skip("no pidfd on this host")
    exited = ExitWait(sleeper)
    assert exited._fd is not None
    os.close(exited._fd)
    started = time.monotonic()
    assert not exited.wait(0.2)
    assert 0.19 <= time.monotonic() - started < 5.0
    assert exited.polls
    sleeper.kill()
    assert exited.wait(30.0) and sleeper.returncode == -9
    exited.close()
