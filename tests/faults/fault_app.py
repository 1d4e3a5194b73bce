"""examples/python/app.py with two knobs for the fault suite (examples/ untouched).

- ``FAULT_SAVE_DELAY`` (seconds): the counter is written to a temporary file,
  a ``saving`` event is logged, the app sleeps this long, then renames the
  file into place (so a SIGKILL can land between the write and the rename).
- ``FAULT_PACE_FILE``: a file holding the seconds per iteration, re-read at
  every iteration (the driver slows the chain while it injects faults and
  speeds it up afterwards); ``ITER_SECONDS`` when the file is absent.

The iteration log has the example's format (``saving`` is an extra event,
ignored by IterLog's checks).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

try:
    from chain.app import AppEnv, ExitCode, StopMonitor, read_counter
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from chain.app import AppEnv, ExitCode, StopMonitor, read_counter


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


def pace(default: float) -> float:
    path = os.environ.get("FAULT_PACE_FILE")
    if path:
        try:
            return float(Path(path).read_text().strip())
        except (OSError, ValueError):
            pass
    return default


def main() -> int:
    env = AppEnv.from_environ(max_iter=60, checkpoint_every=5)
    iter_seconds = float(os.environ.get("ITER_SECONDS", "1.0"))
    save_delay = float(os.environ.get("FAULT_SAVE_DELAY", "0"))
    log = IterLog(os.environ.get("CHAIN_ITER_LOG", "iterations.log"), env.job_id)
    ckpt = Path(env.ckpt_path)

    i = read_counter(ckpt) or 0
    committed = i
    log("start", i)

    def commit() -> None:
        nonlocal committed
        tmp = ckpt.with_name(f".tmp-{ckpt.name}.{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{i}\n")
            fh.flush()
            os.fsync(fh.fileno())
        log("saving", i)
        if save_delay:
            time.sleep(save_delay)
        os.replace(tmp, ckpt)
        committed = i
        log("ckpt", i)

    def finish(code: int) -> int:
        if i != committed:
            commit()
        log("exit", committed, code)
        return code

    with StopMonitor() as monitor:
        while i < env.max_iter:
            step = pace(iter_seconds)
            status = monitor.status(step + save_delay + 1.0)
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
