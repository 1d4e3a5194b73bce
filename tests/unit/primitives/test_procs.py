"""Which processes chain may signal (``chain.primitives.procs``), on real
processes: the very one recorded (pid, start time, boot), never the
caller's own group, never a pid whose start time differs. The pure rule's
table is in tests/backends/test_local_spool.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from chain.primitives.procs import Proc, boot_id, running, send, start_ticks

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the checks read /proc")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A process in a session of its own (as a job is) that waits on its stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, start_new_session=True
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_a_process_is_read_from_proc_with_its_start_time_owner_and_group(child: subprocess.Popen[bytes]) -> None:
    found = Proc.read(child.pid)
    assert found is not None and found.pid == child.pid and found.pgrp == child.pid  # it leads its group
    assert found.uid == os.geteuid() and not found.zombie
    assert start_ticks(child.pid) == found.ticks and found.ticks >= (start_ticks(os.getpid()) or 0)
    assert Proc.read(0) is None and Proc.read(-5) is None


def test_only_the_very_process_recorded_is_running(child: subprocess.Popen[bytes]) -> None:
    ticks, boot = start_ticks(child.pid), boot_id()
    assert running(child.pid, ticks, boot)
    assert ticks is not None and not running(child.pid, ticks + 1, boot)  # a pid reused since
    assert not running(child.pid, ticks, "another-boot") and not running(child.pid, None, boot)
    assert not running(None, ticks, boot) and not running(1, ticks, boot)
    child.kill()
    child.wait(10)
    assert not running(child.pid, ticks, boot)


def test_the_recorded_group_is_signalled_and_nothing_else(child: subprocess.Popen[bytes]) -> None:
    ticks, boot = start_ticks(child.pid), boot_id()
    assert ticks is not None
    assert send(child.pid, ticks + 1, boot, signal.SIGTERM, group=True).startswith(f"pid {child.pid} is another")
    assert send(None, ticks, boot, signal.SIGTERM, group=False) == "pid None is no job's"
    me = start_ticks(os.getpid())
    assert send(os.getpid(), me, boot, signal.SIGTERM, group=False) == (
        f"process {os.getpid()} is in chain's own process group"
    )
    assert child.poll() is None  # none of those reached it
    assert send(child.pid, ticks, boot, signal.SIGTERM, group=True) == ""
    assert child.wait(10) == -signal.SIGTERM
