"""Which processes chain may signal: only the ones it started (the local
backend's jobs, and the app's process group its guard ends, ``jobs.guard``).

A local job record names two processes, its supervisor and its batch shell (the
leader of the job's process group), each by pid, start time (``/proc/PID/stat``
field 22, clock ticks after boot, recorded when the process is started) and
the boot id. Nothing in a record is trusted: before any signal the pid is
looked up again, and it is signalled only when it is the very process that
was recorded (``refusal``, the pure rule). Never signalled:

- a pid <= 1, a negative pid, or none (``os.kill(0)`` and ``os.killpg(0)``
  signal the caller's own process group, -N the group N, 1 is init);
- a process of the caller's own process group, or that group (a job is
  always in a session of its own: a record naming the caller is not one
  chain wrote);
- a pid whose start time is not the recorded one (a pid reused since), one
  recorded before a reboot, a process that has ended, another user's;
- a group whose leader is gone (its number may be someone else's group);
- a record without a start time (hand-made, or written where there is no
  ``/proc``): its pid cannot be told from a reused one, so it is never
  signalled (a command line that looks like chain's is no proof either).

Without ``/proc`` (macOS) nothing can be checked: only a supervisor signals,
and only its own batch shell, which it has not reaped (``own_child``); a
cancel is then seen by the supervisor in the record (it re-reads it every
second).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def boot_id() -> str | None:
    """Changes at every reboot: start times are only comparable within one boot."""
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class Proc:
    """A process as ``/proc`` shows it now."""

    pid: int
    ticks: int  # start time, clock ticks after boot (field 22)
    uid: int  # the owner of /proc/PID (the effective user)
    pgrp: int  # its process group (field 5)
    zombie: bool  # ended, not reaped yet: its pid and group id are still held

    @classmethod
    def read(cls, pid: int) -> Proc | None:
        """The process ``pid``; None when there is none (or no ``/proc``)."""
        if pid <= 0:
            return None
        try:
            stat = (PROC / str(pid) / "stat").read_text()
            uid = (PROC / str(pid)).stat().st_uid
        except OSError:
            return None
        # comm (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        try:
            return cls(pid, int(fields[19]), uid, int(fields[2]), fields[0] in ("Z", "X"))
        except (IndexError, ValueError):
            return None


def start_ticks(pid: int) -> int | None:
    """What a record keeps of a process it starts: its start time (a zombie's
    too: a job that exits at once is still the process that was started)."""
    found = Proc.read(pid)
    return found.ticks if found is not None else None


@dataclass(frozen=True)
class Caller:
    """The process that is about to signal, as the rule needs it."""

    pid: int
    pgrp: int
    uid: int
    boot: str | None

    @classmethod
    def here(cls) -> Caller:
        return cls(os.getpid(), os.getpgrp(), os.geteuid(), boot_id())


def mismatch(pid: int | None, ticks: int | None, boot: str | None, found: Proc | None, caller: Caller) -> str:
    """Pure: why ``found`` (what ``/proc`` shows of ``pid`` now) is not the
    process recorded as ``pid``, started at ``ticks`` in boot ``boot``, "" when
    it is. A process of ``caller``'s own process group never is (a job runs in
    a session of its own: a record naming the caller is not one chain wrote)."""
    if pid is None or pid <= 1:
        return f"pid {pid} is no job's"
    if ticks is None:
        return f"no start time recorded for pid {pid}"
    if boot is not None and boot != caller.boot:
        return f"pid {pid} was recorded before a reboot"
    if found is None:
        return f"process {pid} has ended"
    if found.ticks != ticks:
        return f"pid {pid} is another process now (started at tick {found.ticks}, not {ticks})"
    if pid == caller.pid or pid == caller.pgrp or found.pgrp == caller.pgrp:
        return f"process {pid} is in chain's own process group"
    return ""


def refusal(
    pid: int | None, ticks: int | None, boot: str | None, found: Proc | None, caller: Caller, *, group: bool = False
) -> str:
    """Pure: why ``caller`` must not signal the recorded process (with
    ``group``: the process group it leads), "" when it may: it is the very
    process that was recorded (``mismatch``), the caller's user's, and with
    ``group`` still the leader of its group."""
    if why := mismatch(pid, ticks, boot, found, caller):
        return why
    assert found is not None
    if found.uid != caller.uid:
        return f"process {pid} is another user's"
    if group and found.pgrp != pid:
        return f"process {pid} leads no process group"
    return ""


def running(pid: int | None, ticks: int | None, boot: str | None) -> bool:
    """Is the recorded process still running (the very one, not a zombie)?
    Whoever asks (root may look at a user's chain). Without ``/proc``: is
    there a process ``pid``."""
    if pid is None or pid <= 1:
        return False
    if not PROC.is_dir():
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the pid exists
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    found = Proc.read(pid)
    return found is not None and not found.zombie and not mismatch(pid, ticks, boot, found, Caller.here())


def send(
    pid: int | None, ticks: int | None, boot: str | None, sig: signal.Signals, *, group: bool, own_child: bool = False
) -> str:
    """Signal the recorded process (its group, with ``group``) if it is the
    one recorded; why not ("" when sent, or when it ended meanwhile).
    ``own_child``: the caller started it and has not reaped it, so its pid
    cannot have been reused (the one case where no ``/proc`` will do)."""
    caller = Caller.here()
    if not PROC.is_dir():
        if not own_child or pid is None or pid <= 1 or pid in (caller.pid, caller.pgrp):
            return "no /proc to check the process against its record"
    elif why := refusal(pid, ticks, boot, Proc.read(pid) if pid is not None else None, caller, group=group):
        return why
    assert pid is not None
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # ended since (or not ours after all): nothing was signalled
    return ""
