"""The runner/app contract: exit codes and the environment the runner gives.

The runner starts the app in the user's working directory with:

``MAX_ITER``            total iterations; the app exits 0 when the counter reaches it
``CKPT_PATH``           the progress counter the submitter reads (a plain integer)
``CHECKPOINT_EVERY``    checkpoint every this many iterations
``CHAIN_DEADLINE``      epoch seconds at which the stop signal comes (optional)
``CHAIN_STOP_SIGNAL``   ``TERM`` or ``INT``: the signal the runner will send
``CHAIN_SHELL_HELPERS`` directory holding ``chain.sh`` and ``chain.R`` (optional)
``SLURM_JOB_ID``        the runner's job (optional)
``CHAIN_RESUMING``      ``1`` when the counter is above 0 at the runner's start (a checkpoint
                        to resume from), unset otherwise
``PYTHONUNBUFFERED``    ``1`` unless the user set it (the last lines reach the log)

A ``--counter-cmd`` shell command (the counter read from the app's own
checkpoint) prints the counter, one integer, and exits 0; it exits
``NO_CHECKPOINT_EXIT`` (100) to say there is no checkpoint yet (counter 0).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# the codes, the signal parser and the helpers' place are the chain's too: one
# definition each, in chain.primitives, named here for the app side
from chain.primitives.codes import NO_CHECKPOINT_EXIT, ExitCode
from chain.primitives.paths import shell_helpers_dir
from chain.primitives.signals import signal_named, spelled

__all__ = ["NO_CHECKPOINT_EXIT", "AppEnv", "ExitCode", "shell_helpers_dir", "signal_named"]


def _int(env: Mapping[str, str], name: str, default: int | None) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        if default is None:
            raise ValueError(f"{name} is not set")
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r} is negative")
    return value


@dataclass(frozen=True)
class AppEnv:
    """The contract variables, parsed.  Defaults make a run by hand work."""

    max_iter: int
    ckpt_path: Path
    checkpoint_every: int
    deadline: float | None
    stop_signal: str
    shell_helpers: Path
    job_id: str | None

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        max_iter: int | None = None,
        ckpt_path: str = "state_iter.txt",
        checkpoint_every: int = 20,
    ) -> AppEnv:
        """Parse the environment; the keyword arguments are the defaults used
        when a variable is absent (``max_iter=None`` makes MAX_ITER required).
        Raises ``ValueError`` for a malformed integer (an unparseable
        ``CHAIN_DEADLINE`` is logged and ignored)."""
        env = os.environ if environ is None else environ
        raw_deadline = (env.get("CHAIN_DEADLINE") or "").strip()
        try:
            deadline = float(raw_deadline) if raw_deadline else None
        except ValueError:
            # Same rule as StopMonitor: a deadline we cannot read is no deadline.
            import logging  # here: `chain status` imports this module and never logs

            logging.getLogger("chain.app.contract").warning("ignoring unparseable CHAIN_DEADLINE=%r", raw_deadline)
            deadline = None
        return cls(
            max_iter=_int(env, "MAX_ITER", max_iter),
            ckpt_path=Path(env.get("CKPT_PATH") or ckpt_path),
            checkpoint_every=max(1, _int(env, "CHECKPOINT_EVERY", checkpoint_every)),
            deadline=deadline,
            stop_signal=spelled(env.get("CHAIN_STOP_SIGNAL") or "TERM"),
            shell_helpers=shell_helpers_dir(env),
            job_id=env.get("SLURM_JOB_ID") or None,
        )
