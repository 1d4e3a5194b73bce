"""Waiting for a child's exit without polling.

``Popen.wait(timeout=...)`` polls: it sleeps at most 50 ms between looks
(starting again at 1 ms at each call), so a runner supervising its app
looked about 30 times a second for the app's whole run (~3 ms of CPU a
second, measured here: 4 min a day per runner, and the sweep's runners
share their nodes' CPUs). A pidfd (Linux 5.3, Python 3.9) is marked
readable by the kernel when the process exits: the wait sleeps in ``poll``
until then or its timeout. Where there is none (another kernel, a seccomp
filter refusing the call) it falls back to ``Popen.wait``.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import subprocess

_LONGEST_MS = 2**31 - 1  # poll's limit (about 25 days)


class ExitWait:
    """``wait(timeout)`` on one started, unreaped child: True once it has
    exited (reaped: its ``returncode`` is set), False after ``timeout``
    seconds. A signal handler that returns does not end the wait early (as
    with ``Popen.wait``: PEP 475). ``close`` releases the pidfd."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._fd: int | None = None
        if proc.returncode is None:
            try:
                self._fd = os.pidfd_open(proc.pid)
            except (AttributeError, OSError):  # no pidfd here: Popen's own polling
                self._fd = None

    @property
    def polls(self) -> bool:
        """Whether this wait falls back to ``Popen.wait``'s polling."""
        return self._fd is None

    def wait(self, timeout: float) -> bool:
        if self.proc.returncode is None and self._fd is not None:
            events = poll_events(self._fd, timeout)
            if not events:
                return False
            if not events & select.POLLIN:  # the pidfd broke (closed behind us): Popen's polling from now on
                self.close()
        try:
            self.proc.wait(timeout=timeout)  # at once after the pidfd's word: the child has exited
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):  # closed behind our back already (poll said so)
                os.close(fd)


def poll_events(fd: int, timeout: float) -> int:
    """``fd``'s poll events within ``timeout`` seconds (0: none by then), the
    wait rounded up to whole milliseconds (``poll``: any descriptor number,
    where ``select`` stops at 1024)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    ms = timeout * 1000
    found = poller.poll(_LONGEST_MS if ms >= _LONGEST_MS else max(0, math.ceil(ms)))
    return found[0][1] if found else 0


def readable(fd: int, timeout: float) -> bool:
    """``fd`` is readable within ``timeout`` seconds (a pidfd: its process has exited)."""
    return bool(poll_events(fd, timeout) & select.POLLIN)
