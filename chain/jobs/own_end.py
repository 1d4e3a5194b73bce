"""When a job of the chain ends, as the scheduler has it, at no slurmctld
cost where accounting can say: the submitter asks this at its start, when
many jobs may be starting at once and accounting shows their starts a few
seconds late (about 2 s measured with 16 jobs starting together)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from chain.backends.base import Backend
from chain.errors import ChainError


@dataclass
class OwnEnd:
    """A job's end: ``configured`` (its start plus its configured limit)
    until the scheduler says, then the earlier of the two.

    ``settle`` asks when due: accounting (slurmdbd, no slurmctld RPC) at
    once and every ``retry_every`` seconds for ``patience`` seconds, then
    ``Backend.end_time`` once (slurmctld); that one ask at once where
    queries are cheap (a local file). Until then the configured end holds:
    later than the scheduler's by no more than the job's own start-up."""

    backend: Backend
    job_id: str
    configured: float
    clock: Callable[[], float]
    patience: float = 10.0
    retry_every: float = 2.0
    end: float = field(init=False)
    settled: bool = field(init=False, default=False)
    _began: float = field(init=False)
    _next: float = field(init=False)

    def __post_init__(self) -> None:
        self.end = self.configured
        self._began = self._next = self.clock()

    def settle(self) -> bool:
        """Ask the scheduler if due; True when that moved the end earlier."""
        now = self.clock()
        if self.settled or now < self._next:
            return False
        cheap = self.backend.cheap_queries
        end = None if cheap else self.backend.accounted_end(self.job_id)
        if end is None and (cheap or now >= self._began + self.patience):
            self.settled = True  # slurmctld's word, or none to be had: asked once
            try:
                end = self.backend.scheduler_end(self.job_id)
            except ChainError:
                end = None
        if end is None:
            self._next = now + self.retry_every
            return False
        self.settled = True
        if end >= self.end:
            return False
        self.end = end
        return True
