"""When the submitter asks Slurm about its runner: a small pure policy.

The outcome normally arrives through the runner's own record file (a local
stat, no Slurm call). Slurm is asked only to catch a runner that died
without writing one: rarely while the runner is far from its end, more often
near it. With the defaults a 24-hour runner costs 11 queries an hour
(measured: bench/calls.py), plus 4 calls per submitter restart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PollPolicy:
    file_interval: float = 0.25  # seconds between looks at the record file
    slurm_min: float = 10.0  # never ask Slurm more often than this
    slurm_max: float = 330.0  # never wait longer than this between asks (<= 11 an hour)
    slurmctld_every: float = 1800.0  # between asks accounting answers, slurmctld's own word at least this often

    def next_slurm_query(self, now: float, expected_end: float | None) -> float:
        """Epoch time of the next Slurm query after one made at ``now``.

        ``expected_end`` is the runner's planned end from its start record,
        None while it is pending (then the longest interval applies).
        """
        if expected_end is None:
            return now + self.slurm_max
        remaining = expected_end - now
        if remaining <= 0:
            return now + self.slurm_min
        # Halve the distance to the expected end, within the bounds, and look
        # just after the end itself if that comes sooner.
        step = min(self.slurm_max, max(self.slurm_min, remaining / 2))
        return now + min(step, remaining + self.slurm_min)

    def accounting_delays(self) -> list[float]:
        """Backoff while accounting (no slurmctld RPC) does not yet show an
        ended runner's job ended: its lag, usually well under a second."""
        return [0.1, 0.2, 0.3, 0.5, 1.0]

    def handoff_delays(self) -> list[float]:
        """Backoff while waiting for an ended runner's job to leave the queue."""
        return [0.1, 0.2, 0.3, 0.5, 1.0, 1.0, 2.0, 2.0, 5.0, 5.0, 10.0, 10.0, 15.0]


@dataclass(frozen=True)
class StepAside:
    """Submitter mode: when a submitter whose runner still waits for
    resources hands over to a successor that starts with the runner (Slurm's
    ``after:``), so no submitter holds a slot its own runner waits for (a
    sweep larger than the cluster, a per-user job limit). ``patience``
    seconds of PENDING seen by the scheduler; 0: never."""

    patience: float = 60.0

    def due(self, pending_since: float | None, now: float) -> bool:
        """Time to step aside: the runner has been seen pending for ``patience``."""
        return bool(self.patience) and pending_since is not None and now - pending_since >= self.patience

    def next_query(self, pending_since: float | None, planned: float) -> float:
        """The next scheduler query while the runner is pending: no later
        than when stepping aside would be due."""
        if not self.patience or pending_since is None:
            return planned
        return min(planned, pending_since + self.patience)
