"""When to checkpoint: measured save cost, interval formulas, schedules.

* :class:`CostMeter` measures C, the wall-clock cost of each save, on the
  storage actually used, and logs it (assumed values are always optimistic).
* :func:`young_daly_interval` is sqrt(2 * C * MTBF).
* :func:`overhead_interval` keeps the save overhead below a fraction of the
  run time: for 5 % that is about 20 * C.
* :class:`CheckpointPolicy` combines an every-N-steps schedule, an
  every-N-seconds wall-clock schedule (which bounds the work lost to an
  interruption however long a step is) and, optionally, a wall-clock interval
  recomputed from the measured cost.

Every clock is injectable so that tests never sleep.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "CheckpointPolicy",
    "CostMeter",
    "IntervalMode",
    "SaveReason",
    "StepSchedule",
    "WallClockSchedule",
    "lead_seconds",
    "overhead_interval",
    "young_daly_interval",
]

log = logging.getLogger("chain.app.interval")

Clock = Callable[[], float]


def young_daly_interval(cost_seconds: float, mtbf_seconds: float) -> float:
    """Young/Daly optimum sqrt(2 * C * MTBF), in seconds."""
    if cost_seconds < 0 or mtbf_seconds <= 0:
        raise ValueError("need cost >= 0 and MTBF > 0")
    return math.sqrt(2.0 * cost_seconds * mtbf_seconds)


def overhead_interval(cost_seconds: float, max_overhead: float = 0.05) -> float:
    """Shortest interval whose save overhead C / interval stays below
    ``max_overhead``: 20 * C for the usual 5 %."""
    if cost_seconds < 0 or not 0 < max_overhead < 1:
        raise ValueError("need cost >= 0 and 0 < max_overhead < 1")
    return cost_seconds / max_overhead


def lead_seconds(cost_seconds: float, margin: float = 60.0) -> float:
    """Lead for :meth:`StopMonitor.stop_expected`: two saves plus a margin,
    as in the user guide, so a save started on the warning can finish."""
    return 2.0 * cost_seconds + margin


@dataclass
class CostMeter:
    """Measures and logs the wall-clock cost of each save."""

    clock: Clock = time.monotonic
    samples: list[float] = field(default_factory=list)
    label: str = "checkpoint"

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        """Time the body as one save; recorded only if it completes."""
        start = self.clock()
        yield
        cost = self.clock() - start
        self.samples.append(cost)
        log.info("%s cost C=%.3fs (mean %.3fs over %d)", self.label, cost, self.mean, len(self.samples))

    @property
    def last(self) -> float | None:
        """The most recent cost, if any."""
        return self.samples[-1] if self.samples else None

    @property
    def mean(self) -> float:
        """Mean cost (0 before the first save)."""
        return sum(self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def worst(self) -> float:
        """Largest cost seen (0 before the first save): use it for leads."""
        return max(self.samples, default=0.0)


class IntervalMode(Enum):
    """How the wall-clock interval is chosen."""

    FIXED = "fixed"  # every_seconds as given
    OVERHEAD = "overhead"  # cost / max_overhead (about 20 * C)
    YOUNG_DALY = "young-daly"  # sqrt(2 * C * MTBF)


class SaveReason(Enum):
    """Why the policy asked for a save."""

    STEPS = "steps"
    WALL_CLOCK = "wall-clock"


@dataclass
class StepSchedule:
    """Every ``every`` steps (0 disables)."""

    every: int

    def due(self, step: int) -> bool:
        """True at multiples of ``every``."""
        return self.every > 0 and step > 0 and step % self.every == 0


@dataclass
class WallClockSchedule:
    """Every ``every_seconds`` of wall time since the last save (None disables)."""

    every_seconds: float | None
    clock: Clock = time.monotonic
    last_save: float = field(default=math.nan)

    def __post_init__(self) -> None:
        if math.isnan(self.last_save):
            self.last_save = self.clock()  # the run's start counts as a save

    def due(self) -> bool:
        """True when the interval has elapsed."""
        return self.every_seconds is not None and self.clock() - self.last_save >= self.every_seconds

    def mark_saved(self) -> None:
        """Restart the interval."""
        self.last_save = self.clock()


class CheckpointPolicy:
    """Every N steps and/or every N seconds, optionally cost-derived.

    With ``mode`` OVERHEAD or YOUNG_DALY the wall-clock interval is recomputed
    from the measured cost after each save (``saved(cost)``), bounded below by
    ``min_seconds`` and above by ``every_seconds`` when that is given.
    :meth:`shorten` scales the interval down, e.g. once guaranteed-until has
    passed and the job can be stopped without notice it controls.
    """

    def __init__(
        self,
        *,
        every_steps: int = 0,
        every_seconds: float | None = None,
        mode: IntervalMode = IntervalMode.FIXED,
        mtbf_seconds: float | None = None,
        max_overhead: float = 0.05,
        min_seconds: float = 1.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if mode is IntervalMode.YOUNG_DALY and not mtbf_seconds:
            raise ValueError("YOUNG_DALY needs mtbf_seconds")
        self.steps = StepSchedule(every_steps)
        self.wall = WallClockSchedule(every_seconds, clock)
        self.mode = mode
        self.mtbf_seconds = mtbf_seconds
        self.max_overhead = max_overhead
        self.min_seconds = min_seconds
        self.cap_seconds = every_seconds
        self._factor = 1.0

    @property
    def interval_seconds(self) -> float | None:
        """The wall-clock interval in force (None: steps only)."""
        return self.wall.every_seconds

    def due(self, step: int) -> SaveReason | None:
        """Whether a save is due after completing ``step``, and why."""
        if self.steps.due(step):
            return SaveReason.STEPS
        if self.wall.due():
            return SaveReason.WALL_CLOCK
        return None

    def saved(self, cost_seconds: float | None = None) -> None:
        """Record a save (restarting the wall-clock interval) and its cost."""
        self.wall.mark_saved()
        if cost_seconds is None or self.mode is IntervalMode.FIXED:
            return
        if self.mode is IntervalMode.OVERHEAD:
            interval = overhead_interval(cost_seconds, self.max_overhead)
        else:
            assert self.mtbf_seconds is not None
            interval = young_daly_interval(cost_seconds, self.mtbf_seconds)
        interval = max(self.min_seconds, interval * self._factor)
        if self.cap_seconds is not None:
            interval = min(interval, self.cap_seconds * self._factor)
        if interval != self.wall.every_seconds:
            log.info("checkpoint interval %.1fs (%s, C=%.3fs)", interval, self.mode.value, cost_seconds)
        self.wall.every_seconds = interval

    def shorten(self, factor: float) -> None:
        """Scale the wall-clock interval by ``factor`` (< 1), once."""
        if not 0 < factor <= 1:
            raise ValueError("factor must be in (0, 1]")
        if self._factor != 1.0:
            return  # already shortened; do not compound on every call
        self._factor = factor
        if self.wall.every_seconds is not None:
            self.wall.every_seconds = max(self.min_seconds, self.wall.every_seconds * factor)
            log.info("checkpoint interval shortened to %.1fs", self.wall.every_seconds)
