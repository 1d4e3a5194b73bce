"""The one table of exit codes, in three families whose names say which:

- :class:`ExitCode`: what the **app** exits with (the app side of the
  contract; ``chain.app`` re-exports it), and :data:`NO_CHECKPOINT_EXIT`,
  what a ``--counter-cmd`` exits with for "no checkpoint yet";
- :class:`RunnerExit`: the **runner**'s contract code, recorded in its record
  and judged by the chain (the seed's 0/99/124/1 plus chain's own);
- :class:`SubmitterExit`: what the **submitter job** exits with (its Slurm
  state: COMPLETED or FAILED, what ``sacct`` shows an admin);
- :class:`CliExit`: what a ``chain`` **command** exits with.

A number may mean different things in two families (runner 2 is "modules
could not be loaded", ``chain`` 2 is "bad input"): the family says which.
The shell helpers (``chain/shell/chain.sh``, ``chain.R``) spell the app's
codes again for their languages; a test checks they agree with this table.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "HOOK_CANNOT_START",
    "HOOK_TIMED_OUT",
    "NO_CHECKPOINT_EXIT",
    "CliExit",
    "ExitCode",
    "RunnerExit",
    "SubmitterExit",
]


class ExitCode(IntEnum):
    """The app's side of the runner contract."""

    DONE = 0
    """Every iteration is done: counter == MAX_ITER."""
    TEMPFAIL = 75
    """EX_TEMPFAIL: checkpointed and stopped on a termination warning."""
    STOPPED = 99
    """Checkpointed and stopped voluntarily (stop signal or deadline)."""


NO_CHECKPOINT_EXIT = 100
"""A ``--counter-cmd`` command's exit status for "no checkpoint yet" (counter 0):
any other non-zero status is an error, so a typo never reads as a fresh start."""


class RunnerExit(IntEnum):
    """The runner's contract code for how its app ended (the seed's, plus
    EX_TEMPFAIL from seed 000 and the runner's own refusals). Codes the app
    exits with that are not listed pass through as failures."""

    DONE = 0
    """All iterations done."""
    NO_ADVANCE = 1
    """Stopped at the deadline without checkpoint advance."""
    PREFLIGHT = 2
    """``module load`` failed: the app never ran."""
    BAD_CHECKPOINT = 3
    """The counter is not a plain integer."""
    APP_ALIVE = 5
    """An earlier app of the chain still ran until the stop time: not started."""
    TEMPFAIL = ExitCode.TEMPFAIL.value
    """The app checkpointed on a termination warning."""
    CHECKPOINTED = ExitCode.STOPPED.value
    """The app checkpointed voluntarily."""
    TIMEOUT_ADVANCED = 124
    """Stopped at the deadline with checkpoint advance (the seed's ``timeout``)."""
    CANNOT_START = 127
    """The app's command could not be started."""


class SubmitterExit(IntEnum):
    """What the submitter job exits with."""

    DONE = 0
    """Its part is done: the chain completed or was cancelled, it handed over
    to its successor, or another job drives the chain."""
    CHAIN_ENDED = 1
    """The chain stopped or failed under it, or it could not queue its successor."""
    TERMINATED = 128 + 15
    """SIGTERM from outside chain (a user's scancel): nothing drives the chain now."""


class CliExit(IntEnum):
    """What a ``chain`` command exits with (README: exit codes)."""

    OK = 0
    """Success; a watched chain completed."""
    ERROR = 1
    """A chain error without a more precise code."""
    USAGE = 2
    """Bad input: flag, environment, config file, chain directory, backend."""
    CHECKPOINT = 3
    """The progress counter cannot be read."""
    SCHEDULER = 4
    """The scheduler refused or failed a request (after retries)."""
    CHAIN_FAILED = 10
    """A watched chain ended failed."""
    CHAIN_STOPPED = 11
    """A watched chain stopped itself (no progress, bad checkpoint)."""
    CHAIN_CANCELLED = 12
    """A watched chain was cancelled."""
    BUG = 70
    """EX_SOFTWARE: an unexpected error (``CHAIN_DEBUG=1`` shows it)."""
    INTERRUPTED = 130
    """Ctrl-C."""


HOOK_TIMED_OUT = 124
"""A hook's recorded status when it was ended at its deadline (as coreutils ``timeout``)."""
HOOK_CANNOT_START = 127
"""A hook's recorded status when its command could not be started (as a shell's)."""
