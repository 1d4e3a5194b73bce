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

    python -m chain.jobs.guard PGID GRACE SIGNAL     (stdin: the pipe)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(
    pgid: int,
    grace: float,
    stop_signal: int,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Stop signal, up to ``grace`` seconds, then SIGKILL; True when the group had to be killed."""
    if not _alive(pgid):
        return False
    try:
        os.killpg(pgid, stop_signal)
    except ProcessLookupError:
        return False
    give_up = clock() + grace
    while clock() < give_up:
        if not _alive(pgid):
            return False
        sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def main(argv: list[str]) -> int:
    pgid, grace, stop_signal = int(argv[0]), float(argv[1]), int(argv[2])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.read(0, 4096):  # until the runner's end closes the pipe
        pass
    if stop_group(pgid, grace, stop_signal):
        print(
            f"chain guard: the app (process group {pgid}) outlived its runner; killed after {grace:.0f}s",
            file=sys.stderr,
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
