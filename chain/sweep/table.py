"""``chain sweep status``: one row per point, and the sweep's state counts. Pure.

A row is built from the point's ``chain list`` row (its own files) and
what the sweep's one scheduler query said of it (nothing drives it, or "").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chain.api.listing import ChainRow
from chain.core.model import ChainState
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
        }


def point_row(entry: PointEntry, chain: ChainRow | None, stranded: str = "") -> PointRow:
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
    )


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
