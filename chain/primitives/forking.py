"""Chain's own code in a child forked from the running process, on the terms
``subprocess.Popen`` gives a new ``python -m MODULE ARGS`` (a session of its
own, descriptors 0-2 and no other, its own signal handling), without
starting an interpreter and importing chain again: on a sweep's busy CPUs
that was much of a job's time. The relay's short report runs so
(``effects.hooks``), and the app's guard (``jobs.guard``).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

# the signals a job's processes get from outside (scancel, preemption, a
# user's signal to the app); blocked across the fork: none of this process's
# handlers may run in the child before its own are set
CHILD_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)


def fork_main(
    main: Callable[[list[str]], int],
    args: Sequence[str],
    *,
    stdin: int = 0,
    stdout: int = 1,
    stderr: int = 2,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    umask: int | None = None,
    ignore: tuple[signal.Signals, ...] = (),
) -> int | None:
    """Run ``main(args)``, chain's own code, in a forked child, as
    ``subprocess.Popen`` would run ``python -m MODULE ARGS``
    (``start_new_session``; ``stdin``, ``stdout``, ``stderr`` as 0, 1, 2 and
    no other descriptor; ``cwd``, ``env``, ``umask``; Python's default
    signal handling, but the ``ignore``d signals ignored from the start).
    Its exit code is ``main``'s (1 and the traceback on stderr for an
    exception). Returns its pid, for the caller to reap; None, nothing
    started, beside another thread (a fork is not safe then)."""
    if threading.active_count() > 1:
        return None
    for stream in (sys.stdout, sys.stderr):
        flush_quietly(stream)  # nothing buffered here is written twice, by the child too
    # The child never collects: no garbage of this process is finalized there,
    # over descriptors it reuses. Disabled before the fork, so that no
    # collection runs in the child before its first instruction either (a
    # gc.collect() here instead cost each fork ~5 ms of CPU).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_SIGNALS + ignore)
    collecting = gc.isenabled()
    gc.disable()  # after the block: no handler of this process runs while the collector is off
    try:
        pid = os.fork()
    except OSError:
        _restore(blocked, collecting)
        raise
    if pid:
        _restore(blocked, collecting)
        return pid
    code: object = 1
    try:  # whatever happens in the child, it ends here: never back up the caller's stack
        try:
            _child_setup(stdin, stdout, stderr, cwd, env, umask, ignore)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001  (as Python itself: the traceback on stderr, exit 1)
            code = 1
            sys.__excepthook__(*sys.exc_info())  # Python's own print of it, no import in the child
        finally:
            flush_quietly(sys.stdout)
            flush_quietly(sys.stderr)
    finally:
        os._exit(code & 0xFF if isinstance(code, int) else 1)


def _restore(blocked: set[int | signal.Signals], collecting: bool) -> None:
    """In the parent after the fork: its collector and signal mask as they
    were, the collector first (a handler run at the unblock may raise)."""
    if collecting:
        gc.enable()
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _child_setup(
    stdin: int,
    stdout: int,
    stderr: int,
    cwd: Path | None,
    env: dict[str, str] | None,
    umask: int | None,
    ignore: tuple[signal.Signals, ...],
) -> None:
    """In the forked child, with its signals blocked: a session, handlers,
    descriptors, directory, umask and environment of its own."""
    os.setsid()
    for sig in CHILD_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)  # this process's handlers are not the child's
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in ignore:
        signal.signal(sig, signal.SIG_IGN)
    for fd, to in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, to)
    sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)  # noqa: SIM115
    _close_from(3)
    if cwd is not None:
        os.chdir(cwd)
    if umask is not None:
        os.umask(umask)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)


def _close_from(low: int) -> None:
    """Close every descriptor from ``low`` on: those ``/proc/self/fd`` lists
    (``closerange`` up to the open-files limit is a million calls where the
    C library has no ``close_range`` and the limit is high)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        os.closerange(low, os.sysconf("SC_OPEN_MAX"))
        return
    for fd in fds:
        if fd >= low:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already


def flush_quietly(stream: IO[str] | None) -> None:
    """Flush ``stream``; a full disk or a closed stream is no error here."""
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        pass
