"""The contract at a step boundary, for any training loop: save now? exit
now, with which code? Shared by the torch and Lightning adapters."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from chain.app.interval import CheckpointPolicy, CostMeter, lead_seconds
from chain.app.stop import StopMonitor

__all__ = ["StepGate"]


# -------------------------------------------------------------- step gate


class StepGate:
    """The contract at a step boundary: save now?  exit now, with which code?

    Reads :class:`StopMonitor` (stop signal, ``CHAIN_DEADLINE``, termination
    warnings) with a lead of two measured saves, two of the slowest steps seen
    (the time between two checks) and ``margin_seconds``, and a
    :class:`CheckpointPolicy` (every N steps and/or seconds).  A stop wants a
    save and exit 99 (signal, deadline) or 75 (warning); a new warning
    episode or the policy wants a save only.  Wrap each save in
    :meth:`measure` so the lead follows the real save cost.
    """

    def __init__(
        self,
        monitor: StopMonitor,
        policy: CheckpointPolicy,
        *,
        margin_seconds: float = 5.0,
        meter: CostMeter | None = None,
    ) -> None:
        self.monitor = monitor
        self.policy = policy
        self.margin_seconds = margin_seconds
        self.meter = meter or CostMeter()
        self.step_seconds = 0.0
        """The longest time between two checks, the first one excepted (warm-up)."""
        self._last: float | None = None
        self._intervals = 0

    def lead(self) -> float:
        """How long before a deadline to stop: a save started then finishes."""
        margin = self.margin_seconds + 2 * self.step_seconds
        return lead_seconds(self.meter.worst, margin=margin)

    def check(self, count: int | None) -> tuple[bool, int | None]:
        """``(save, exit_code)`` after ``count`` units of work (the policy's
        step schedule is skipped when ``count`` is None)."""
        now = time.monotonic()
        if self._last is not None:
            self._intervals += 1
            if self._intervals > 1:
                self.step_seconds = max(self.step_seconds, now - self._last)
        self._last = now
        status = self.monitor.status(self.lead())
        if status.exit_code is not None:
            return True, int(status.exit_code)
        if status.guarantee_expired:
            self.policy.shorten(0.5)  # preemptible without notice: lose less per stop
        urgent = self.monitor.urgent_save_due(status)
        if count is None:
            due = self.policy.wall.due()
        else:
            due = self.policy.due(count) is not None
        return urgent or due, None

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        """Time one save: feeds the lead and restarts the policy's interval."""
        with self.meter.measure():
            yield
        self.policy.saved(self.meter.last)
