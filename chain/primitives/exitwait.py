"""Waiting for a child's exit without polling.

``Popen.wait(timeout=...)`` polls: it sleeps at most 50 ms between looks, so
a runner supervising its app woke ~20 times a second for the app's whole run
(~3 ms of CPU a second, measured here: 4 min a day per runner, and the
sweep's runners share their nodes' CPUs). A pidfd (Linux 5.3, Python 3.9)
is marked readable by the kernel when the process exits: the wait sleeps in
``poll`` until then or its timeout. Where there is none (another kernel, a
seccomp filter refusing the call) it falls back to ``Popen.wait``.
"""

from __future__ import annotations

import os
import select
import subprocess


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
        if self.proc.returncode is not None:
            return True
        if self._fd is None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        if not readable(self._fd, timeout):
            return False
        self.proc.wait()  # exited: reaps at once
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def readable(fd: int, timeout: float) -> bool:
    """``fd`` is readable within ``timeout`` seconds (``poll``: any descriptor
    number, where ``select`` stops at 1024; a pidfd is readable once its
    process has exited)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    longest = 2**31 - 1  # poll's limit, in ms (about 25 days)
    return bool(poller.poll(longest if timeout * 1000 >= longest else max(0, int(timeout * 1000))))
