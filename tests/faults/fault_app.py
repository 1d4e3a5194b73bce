"""examples/python/app.py with two knobs for the fault suite (examples/ untouched).

The counter is saved by ``chain.app``'s own atomic write (``write_counter``:
an ``O_EXCL`` temporary, fsync, ``os.replace``, fsync of the directory), and
the app marks where it is, so a SIGKILL "mid-save" is proven by the app's own
log, not assumed:

- ``saving <i>``: about to call ``chain.app.write_counter``;
- ``inside <i>``: inside ``chain.primitives.atomic.write_at`` (chain.app's write), the
  temporary written and fsync'ed, the rename not done (logged by the rename
  itself, see ``RenameGate``; it then holds ``FAULT_SAVE_DELAY`` seconds, the
  window the driver kills in);
- ``ckpt <i>``: ``write_counter`` returned, the counter is published.

``FAULT_PACE_FILE``: a file holding the seconds per iteration and, optionally,
the save delay (``"0.25 0.4"``), re-read at every iteration (the driver slows
the chain while it injects faults and speeds it up afterwards);
``ITER_SECONDS`` and ``FAULT_SAVE_DELAY`` when the file is absent.

The iteration log has the example's format (``saving`` and ``inside`` are
extra events, ignored by IterLog's checks).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

try:
    from chain.app import AppEnv, ExitCode, StopMonitor, read_counter, write_counter
    from chain.primitives import (
        atomic as chain_atomic,  # where the writes live (chain.app names them)
    )
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from chain.app import AppEnv, ExitCode, StopMonitor, read_counter, write_counter
    from chain.primitives import (
        atomic as chain_atomic,  # where the writes live (chain.app names them)
    )


class IterLog:
    """``<epoch> <event> <iteration> <job> <pid> [code]`` lines, appended."""

    def __init__(self, path: str, job: str | None) -> None:
        self.path = path
        self.job = job or "-"

    def __call__(self, event: str, iteration: int, code: int | None = None) -> None:
        fields = [f"{time.time():.3f}", event, str(iteration), self.job, str(os.getpid())]
        if code is not None:
            fields.append(str(code))
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(" ".join(fields) + "\n")
            fh.flush()


def pace(default: float, default_delay: float) -> tuple[float, float]:
    path = os.environ.get("FAULT_PACE_FILE")
    if path:
        try:
            words = Path(path).read_text().split()
            return float(words[0]), float(words[1]) if len(words) > 1 else default_delay
        except (OSError, ValueError, IndexError):
            pass
    return default, default_delay


class RenameGate:
    """Stands in for ``os`` inside ``chain.primitives.atomic`` only (every attribute
    is the real module's) except ``replace``: called there by ``write_at``
    (``write_bytes_atomic``'s) after the temporary is written and fsync'ed, it logs
    ``inside`` (checking its caller is chain.app's atomic write), holds
    ``delay`` seconds, then renames. A kill in that hold lands inside
    chain.app's save."""

    def __init__(self, log: IterLog) -> None:
        self.log = log
        self.value = 0
        self.delay = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def replace(self, src: Any, dst: Any, **dir_fds: Any) -> None:
        # the one atomic writer (write_at, under write_bytes_atomic) renames within its directory's fd
        caller = sys._getframe(1).f_code
        if caller.co_name != "write_at" or caller is not chain_atomic.write_at.__code__:
            raise AssertionError(f"RenameGate called from {caller.co_filename}:{caller.co_name}")
        self.log("inside", self.value)
        if self.delay:
            time.sleep(self.delay)
        os.replace(src, dst, **dir_fds)


def main() -> int:
    env = AppEnv.from_environ(max_iter=60, checkpoint_every=5)
    iter_seconds = float(os.environ.get("ITER_SECONDS", "1.0"))
    save_delay = float(os.environ.get("FAULT_SAVE_DELAY", "0"))
    log = IterLog(os.environ.get("CHAIN_ITER_LOG", "iterations.log"), env.job_id)
    ckpt = Path(env.ckpt_path)
    gate = RenameGate(log)
    setattr(chain_atomic, "os", gate)  # noqa: B010 - the atomic module's own `os` name only

    i = read_counter(ckpt) or 0
    committed = i
    log("start", i)

    def commit() -> None:
        nonlocal committed
        gate.value = i
        gate.delay = pace(iter_seconds, save_delay)[1]
        log("saving", i)
        write_counter(ckpt, i)  # chain.app's atomic write
        committed = i
        log("ckpt", i)

    def finish(code: int) -> int:
        if i != committed:
            commit()
        log("exit", committed, code)
        return code

    with StopMonitor() as monitor:
        while i < env.max_iter:
            step, delay = pace(iter_seconds, save_delay)
            status = monitor.status(step + delay + 1.0)
            if status.exit_code is not None:
                return finish(status.exit_code)
            if monitor.urgent_save_due(status) and i != committed:
                commit()
            time.sleep(step)
            i += 1
            log("iter", i)
            if i % env.checkpoint_every == 0:
                commit()
        return finish(ExitCode.DONE)


if __name__ == "__main__":
    sys.exit(main())
