"""The chain's model: job and chain states, the exit contract, the counter.

Pure: no I/O. Every other part (the decision, the store, the backends, the
jobs) takes these from here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from chain.errors import CheckpointError
from chain.primitives import atomic
from chain.primitives.codes import CliExit, RunnerExit


class TextEnum(str, enum.Enum):
    """An enum whose members are their text, in an f-string too: what
    ``enum.StrEnum`` does from Python 3.11 (a view prints a judged runner's
    state or verdict as the word, never ``Verdict.STOP``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class JobState(TextEnum):
    """Slurm's job states (base names, as sacct/squeue print them)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    RESIZING = "RESIZING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    REVOKED = "REVOKED"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, text: str) -> JobState:
        """Parse a state as printed by squeue, sacct or scontrol.

        sacct prints ``CANCELLED by 1000``; squeue may print ``NODE_FAIL`` or
        the short ``NF``; anything unknown maps to UNKNOWN rather than raising.
        """
        word = text.strip().split(" ")[0].rstrip("+").upper()
        if word in cls.__members__:
            return cls[word]
        return _SHORT_STATES.get(word, cls.UNKNOWN)

    @property
    def active(self) -> bool:
        """True while the job holds or waits for resources."""
        return self in _ACTIVE

    @property
    def finished(self) -> bool:
        return not self.active and self is not JobState.UNKNOWN

    @property
    def final(self) -> bool:
        """The job has ended for good: its accounting record no longer changes."""
        return self in _FINAL

    @property
    def may_come_back(self) -> bool:
        """An end after which Slurm may requeue the job (preemption, a lost
        node): accounting's final word on it is not the last one."""
        return self in (JobState.PREEMPTED, JobState.NODE_FAIL)

    @property
    def for_good(self) -> bool:
        """Final, and no requeue can follow (``final``, not ``may_come_back``):
        accounting's word on it stands whatever its lag."""
        return self.final and not self.may_come_back


# the one job-state table every backend and command uses
_FINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.CANCELLED,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        JobState.REVOKED,
    }
)

_ACTIVE = frozenset(
    {
        JobState.PENDING,
        JobState.CONFIGURING,
        JobState.RUNNING,
        JobState.COMPLETING,
        JobState.SUSPENDED,
        JobState.REQUEUED,
        JobState.RESIZING,
    }
)

_SHORT_STATES = {
    "PD": JobState.PENDING,
    "CF": JobState.CONFIGURING,
    "R": JobState.RUNNING,
    "CG": JobState.COMPLETING,
    "S": JobState.SUSPENDED,
    "RQ": JobState.REQUEUED,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "TO": JobState.TIMEOUT,
    "CA": JobState.CANCELLED,
    "NF": JobState.NODE_FAIL,
    "PR": JobState.PREEMPTED,
    "OOM": JobState.OUT_OF_MEMORY,
    "BF": JobState.BOOT_FAIL,
    "DL": JobState.DEADLINE,
}


# The runner's codes that hand over to the next runner (the table: chain.primitives.codes).
CONTINUE_CODES = frozenset({RunnerExit.CHECKPOINTED, RunnerExit.TIMEOUT_ADVANCED, RunnerExit.TEMPFAIL})
# Slurm ended the runner but the app may have checkpointed before it did.
CONTINUE_STATES = frozenset({JobState.TIMEOUT, JobState.PREEMPTED, JobState.NODE_FAIL})


class ChainState(str, enum.Enum):
    PENDING = "pending"  # submitted, submitter not started yet
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"  # a runner failed
    STOPPED = "stopped"  # the chain stopped itself: no progress, bad checkpoint
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (ChainState.COMPLETED, ChainState.FAILED, ChainState.STOPPED, ChainState.CANCELLED)

    @property
    def exit_code(self) -> int:
        """What ``chain submit --wait`` and ``chain status --watch`` exit with
        once the chain has ended in this state (README: exit codes)."""
        return int(_END_EXIT_CODES.get(self, CliExit.OK))


# 0 only for a completed chain; distinct from the ChainError codes 1-4 and 70.
_END_EXIT_CODES = {
    ChainState.COMPLETED: CliExit.OK,
    ChainState.FAILED: CliExit.CHAIN_FAILED,
    ChainState.STOPPED: CliExit.CHAIN_STOPPED,
    ChainState.CANCELLED: CliExit.CHAIN_CANCELLED,
}


def parse_counter(text: str, *, path: str = "CKPT_PATH") -> int:
    """The checkpoint counter, strictly: one non-negative integer, nothing else.

    The seed's ``tr -cd 0-9`` read ``v2 iter 10`` as 210 and an unreadable
    file as 0 (restarting the work); this refuses both. The parser is the app
    side's too (``chain.primitives.atomic``); this gives its error the chain's form.
    """
    try:
        return atomic.parse_counter(text, path)
    except atomic.CounterFormatError as exc:
        raise counter_error(path, exc) from None


def counter_error(path: object, exc: atomic.CounterFormatError) -> CheckpointError:
    """The chain's one-line error for a counter that is not a plain integer."""
    return CheckpointError(f"checkpoint counter {path} does not hold a plain integer: {exc.text!r}")


@dataclass(frozen=True)
class JobInfo:
    """What a backend knows about one job.

    ``exit_code`` is the job's real exit status (0-255) when known: backends
    must undo sacct's "minus 128" for codes of 128 and above where they can
    tell (see the Slurm CLI backend). ``signal`` is the terminating signal, if
    any. ``cancelled_by`` is the uid/user that cancelled the job, if known.
    ``start``/``end`` are epoch seconds (``end`` is the scheduled end for a
    running job, the real end for a finished one); None when unknown.
    """

    job_id: str
    state: JobState
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    name: str = ""
    start: float | None = None
    end: float | None = None
    cancelled_by: str | None = None
    source: str = ""  # which query answered: squeue, sacct, scontrol, local
    preempt_time: float | None = None  # when Slurm began to preempt it (scontrol's PreemptTime), if it did
    restarts: int | None = None  # how often Slurm requeued it (scontrol's Restarts)
