"""The app's guard: a tiny process beside the app that ends the app's
process group when the runner dies without ending it.

Slurm's ``proctrack/linuxproc`` finds a job's processes through their
parents: once the runner is gone, its app (re-parented to init) is no longer
the job's, and an app that ignores its stop signal (the PDEATHSIG the runner
asks for) would run on forever (measured on the dev cluster). The guard
holds the read end of a pipe whose write end only the runner has; the pipe
closes when the runner exits, however it exits. Then the guard sends the
app's group the stop signal, waits ``grace`` seconds, and kills whatever is
left. It ignores SIGTERM/SIGINT (a scancel signals every process of the
job; the guard must outlive the runner to do its work).

The group is signalled only while its leader is the very process the runner
started (``chain.primitives.procs``, the rule the local backend's signals
follow): the runner passes the app's start time, read while the app was its
unreaped child. A pid <= 1, the guard's own group, another user's process, a
leader that has ended (its number may be another group's by then) or one
whose start time is not the recorded one is never signalled; so is any
group where there is no ``/proc`` to check against (TICKS ``-``).

    python -m chain.jobs.guard PGID TICKS GRACE SIGNAL     (stdin: the pipe)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from chain.primitives import procs

NO_TICKS = "-"  # TICKS when the runner could not read the app's start time (no /proc)


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


def guard_argv(pid: int, grace: float, stop_signal: int) -> list[str]:
    """The guard's command line for the app ``pid``, just started by the
    caller and not reaped (its start time is read now, while its pid cannot
    have been reused)."""
    ticks = procs.start_ticks(pid)
    shown = NO_TICKS if ticks is None else str(ticks)
    return [sys.executable, "-m", "chain.jobs.guard", str(pid), shown, str(grace), str(int(stop_signal))]


def main(argv: list[str]) -> int:
    pid, ticks, grace, stop_signal = int(argv[0]), argv[1], float(argv[2]), signal.Signals(int(argv[3]))
    app = App(pid, None if ticks == NO_TICKS else int(ticks))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.read(0, 4096):  # until the runner's end closes the pipe
        pass
    if stop_group(app, grace, stop_signal):
        print(
            f"chain guard: the app (process group {pid}) outlived its runner; killed after {grace:.0f}s",
            file=sys.stderr,
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
