"""``chain sweep status``: one row per point, and the sweep's state counts. Pure.

A row is built from the point's ``chain list`` row (its own files) and
what the sweep's one scheduler query said of it: nothing drives it, or the
job that holds it back waits, and on what (``waiting_on``), or "".
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chain.api.listing import ChainRow
from chain.core.model import ChainState, JobInfo, JobState
from chain.core.status import ChainStatus
from chain.sweep.params import Scalar
from chain.sweep.record import PointEntry


class PointState(str, enum.Enum):
    """A point's state: its chain's, or why it has none to show."""

    PENDING = ChainState.PENDING.value
    RUNNING = ChainState.RUNNING.value
    COMPLETED = ChainState.COMPLETED.value
    FAILED = ChainState.FAILED.value
    STOPPED = ChainState.STOPPED.value
    CANCELLED = ChainState.CANCELLED.value
    NOT_SUBMITTED = "not submitted"  # its submit failed, or never came (resume submits it)
    UNREADABLE = "unreadable"  # its chain's files cannot be read (the reason says why)

    @property
    def done(self) -> bool:
        """Nothing left to do for it (a resume leaves it alone)."""
        return self is PointState.COMPLETED

    @property
    def active(self) -> bool:
        return self in (PointState.PENDING, PointState.RUNNING)


@dataclass(frozen=True)
class PointRow:
    """One point as ``chain sweep status`` shows it."""

    name: str
    params: Mapping[str, Scalar]
    state: PointState
    iteration: int = 0
    max_iter: int = 0
    rate_per_hour: float | None = None
    eta_seconds: float | None = None
    reason: str = ""
    chain_id: str = ""
    stranded: str = ""  # not over, and no job of it can move it: why (chain sweep resume continues it)
    waiting: str = ""  # the job that holds it back is pending: which, and on what (Slurm's reason, in words)

    def to_json(self) -> dict[str, Any]:
        return {
            "point": self.name,
            "params": dict(self.params),
            "state": self.state.value,
            "iteration": self.iteration,
            "max_iter": self.max_iter,
            "rate_per_hour": self.rate_per_hour,
            "eta_seconds": self.eta_seconds,
            "reason": self.reason,
            "chain_id": self.chain_id,
            "stranded": self.stranded,
            "waiting": self.waiting,
        }


def point_row(entry: PointEntry, chain: ChainRow | None, stranded: str = "", waiting: str = "") -> PointRow:
    """The point's row from its chain's listing row (None: no chain in its directory)."""
    params = entry.point.as_dict()
    if chain is None:
        return PointRow(entry.name, params, PointState.NOT_SUBMITTED)
    try:
        state = PointState(chain.state)
    except ValueError:
        state = PointState.UNREADABLE
    return PointRow(
        entry.name,
        params,
        state,
        chain.iteration,
        chain.max_iter,
        chain.rate_per_hour,
        chain.eta_seconds,
        chain.reason,
        chain.chain_id,
        stranded,
        waiting,
    )


# Slurm's pending reasons (squeue %r) a user meets in a sweep, in words
_PENDING = {
    "Priority": "priority (jobs ahead of it in the queue)",
    "Resources": "resources (the nodes it needs are busy)",
    "Dependency": "its dependency (the job before it)",
    "BeginTime": "its begin time",
    "JobHeldUser": "a hold (scontrol release)",
    "JobHeldAdmin": "an administrator's hold",
    "ReqNodeNotAvail": "nodes that are not available",
    "PartitionTimeLimit": "the partition's time limit (it asks for more)",
}


def pending_why(reason: str) -> str:
    """Slurm's pending reason in words: a limit of the user's jobs names itself."""
    shown = "".join(c for c in reason if c.isprintable())[:60]
    if shown in _PENDING:
        return _PENDING[shown]
    if shown.startswith(("Assoc", "QOS")) or shown.endswith("Limit"):
        return f"a job limit ({shown})"
    return shown or "the scheduler"


def waiting_on(status: ChainStatus, jobs: Mapping[str, JobInfo]) -> str:
    """The job that holds the chain back while it is pending, and why
    (``jobs``: the scheduler's answer for the chain's live jobs); "" when
    none does: its runner runs, or nothing of it is pending. A submitter
    that runs while its runner waits is not the hold-up: the runner is."""
    runner = status.runner_job_id if status.runner_live else ""
    held = (
        [("runner", runner)]
        if runner
        else [("submitter", status.submitter_job_id), ("next runner", status.next_job_id)]
    )
    for what, job_id in held:
        info = jobs.get(job_id) if job_id else None
        if info is not None and info.state is JobState.PENDING:
            return f"{what} job {job_id} waits on {pending_why(info.reason)}"
        if info is not None and info.state is JobState.RUNNING:
            return ""
    return ""


def state_counts(rows: Iterable[PointRow]) -> dict[str, int]:
    """How many points are in each state (every state, in ``PointState``'s order)."""
    counts = {state.value: 0 for state in PointState}
    for row in rows:
        counts[row.state.value] += 1
    return counts


@dataclass(frozen=True)
class SweepStatus:
    """Every point of a sweep; ``to_json()`` is ``chain sweep status --json``."""

    directory: str
    rows: tuple[PointRow, ...]
    scheduler_error: str = ""  # the one query failed: nothing is judged stranded

    @property
    def counts(self) -> dict[str, int]:
        return state_counts(self.rows)

    @property
    def ended(self) -> bool:
        """No point has anything running or queued."""
        return not any(row.state.active and not row.stranded for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "counts": self.counts,
            "scheduler_error": self.scheduler_error,
            "points": [row.to_json() for row in self.rows],
        }
