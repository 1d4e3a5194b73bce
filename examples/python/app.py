"""The seed's iteration app in Python, run by a chain runner (or by hand).

State is the progress counter in CKPT_PATH.  Every CHECKPOINT_EVERY
iterations it is written atomically; on the stop signal (TERM or INT), when
the runner's deadline is near, or on a termination warning, the app writes it
and exits (99, or 75 for the warning); at MAX_ITER it exits 0.  Each event is
appended to CHAIN_ITER_LOG for verification.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

try:
    from chain.app import AppEnv, ExitCode, StopMonitor, log_iteration, read_counter, write_counter
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from chain.app import AppEnv, ExitCode, StopMonitor, log_iteration, read_counter, write_counter


def main() -> int:
    env = AppEnv.from_environ(max_iter=60, checkpoint_every=5)
    iter_seconds = float(os.environ.get("ITER_SECONDS", "1.0"))
    lead = iter_seconds + 1.0  # room for one more iteration and a save

    i = read_counter(env.ckpt_path) or 0
    committed = i
    log_iteration("start", i)

    def commit() -> None:
        nonlocal committed
        write_counter(env.ckpt_path, i)
        committed = i
        log_iteration("ckpt", i)

    def finish(code: int) -> int:
        if i != committed:
            commit()
        log_iteration("exit", committed, code)
        return code

    with StopMonitor() as monitor:
        while i < env.max_iter:
            status = monitor.status(lead)
            if status.exit_code is not None:
                reasons = " ".join(sorted(r.value for r in status.reasons))
                print(f"stopping at iteration {i}: {reasons}", file=sys.stderr)
                return finish(status.exit_code)
            if monitor.urgent_save_due(status) and i != committed:
                commit()  # the guarantee is ending: save now, keep going
            # The "computation" of iteration i + 1.  A signal does not cut it
            # short (the handler only sets a flag and sleep resumes), so it is
            # complete and counts; the stop is acted on at the next boundary.
            time.sleep(iter_seconds)
            i += 1
            log_iteration("iter", i)
            if i % env.checkpoint_every == 0:
                commit()
        return finish(ExitCode.DONE)


if __name__ == "__main__":
    sys.exit(main())
