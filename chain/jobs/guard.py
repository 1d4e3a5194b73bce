"""The app's guard: a tiny process beside the app that ends the app's
process group when the runner dies without ending it.

Slurm's ``proctrack/linuxproc`` finds a job's processes through their
parents: once the runner is gone, its app (re-parented to init) is no longer
the job's, and an app that ignores its stop signal (the PDEATHSIG the runner
asks for) would run on forever (measured on the dev cluster). The guard
holds the read end of a pipe whose write end only the runner has; the pipe
closes when the runner exits, however it exits. Then the guard sends the
app's group the stop signal, waits ``grace`` seconds, and kills whatever is
left. It ignores the signals a ``scancel`` sends every process of the job
(TERM, INT, and those a user may send the app: HUP, USR1, USR2): the guard
must outlive the runner to do its work.

The guard is a fork of the runner (``start_guard``, through
``chain.primitives.forking``), not a new interpreter: a runner starts one
with every app, when the sweep's runners start together and their Python is
what the node's CPUs spend (``bench/sweep.py``). The child only reads the
pipe, looks at ``/proc`` and signals; the signals it ignores are ignored
from its first instruction. Its command line is the runner's; its name
(``ps -e``, ``top``, ``pgrep chain-guard``) is ``chain-guard``.

The group is signalled only while its leader is the very process the runner
started (``chain.primitives.procs``, the rule the local backend's signals
follow): the app's start time is read while the app is the runner's
unreaped child. A pid <= 1, the guard's own group, another user's process, a
leader that has ended (its number may be another group's by then) or one
whose start time is not the recorded one is never signalled; so is any
group where there is no ``/proc`` to check against.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from chain.primitives import procs
from chain.primitives.forking import CHILD_SIGNALS, fork_main

PR_SET_NAME = 15  # prctl: the process's name (``comm``)
NO_TICKS = "-"  # the app's start time could not be read (no /proc): never signalled


@dataclass(frozen=True)
class App:
    """The app's process as the runner started it: the leader of its group."""

    pid: int
    ticks: int | None  # its start time (``procs.start_ticks``); None: unknown, never signalled

    def signal(self, sig: signal.Signals) -> bool:
        """Signal the app's group if its leader is still the recorded app; whether it was."""
        return not procs.send(self.pid, self.ticks, None, sig, group=True)

    def alive(self) -> bool:
        return procs.running(self.pid, self.ticks, None)


def stop_group(
    app: App,
    grace: float,
    stop_signal: signal.Signals,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Stop signal, up to ``grace`` seconds, then SIGKILL; True when the group had to be killed."""
    if not app.alive() or not app.signal(stop_signal):
        return False
    give_up = clock() + grace
    while clock() < give_up:
        if not app.alive():
            return False
        sleep(0.2)
    return app.alive() and app.signal(signal.SIGKILL)


def watch(app: App, grace: float, stop_signal: signal.Signals, read: Callable[[], bytes]) -> str | None:
    """The guard's work: ``read`` (the pipe) until the runner's end closes
    it, then stop the app's group; what to say when it had to be killed."""
    while read():
        pass
    if stop_group(app, grace, stop_signal):
        return f"chain guard: the app (process group {app.pid}) outlived its runner; killed after {grace:.0f}s"
    return None


@dataclass
class Guard:
    """A running guard, as its runner holds it: its pid and the pipe's write end."""

    pid: int
    pipe: int

    def release(self) -> None:
        """The app has ended: close the pipe (the guard finds nothing to stop
        and exits) and reap the guard if it is gone already (else it is
        reaped when the runner ends: a runner does not wait for it)."""
        os.close(self.pipe)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)


def start_guard(app_pid: int, grace: float, stop_signal: signal.Signals) -> Guard | None:
    """Fork the guard of the app ``app_pid``, just started by the caller and
    not reaped (its start time is read now, while its pid cannot have been
    reused). None: not started, the caller having another thread. Raises
    OSError."""
    ticks = procs.start_ticks(app_pid)
    read_end, write_end = os.pipe()
    try:
        with open(os.devnull, "rb") as null:
            args = [str(app_pid), NO_TICKS if ticks is None else str(ticks), str(grace), str(int(stop_signal))]
            # what a scancel may send every process of the job: the guard lives on through them
            pid = fork_main(main, args, stdin=read_end, stdout=null.fileno(), ignore=CHILD_SIGNALS)
    except OSError:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    if pid is None:
        os.close(write_end)
        return None
    return Guard(pid, write_end)


def main(argv: list[str]) -> int:
    """The guard's child: ``PID TICKS GRACE SIGNAL``, the pipe as stdin."""
    _name_process(b"chain-guard")
    pid, ticks, grace, stop_signal = int(argv[0]), argv[1], float(argv[2]), signal.Signals(int(argv[3]))
    app = App(pid, None if ticks == NO_TICKS else int(ticks))
    said = watch(app, grace, stop_signal, lambda: os.read(0, 4096))
    if said:
        print(said, file=sys.stderr, flush=True)
    return 0


def _name_process(name: bytes) -> None:
    """This process's name as ``ps -e`` shows it (Linux; elsewhere, or
    without ctypes, nothing: a name is no reason to leave the app unguarded)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
