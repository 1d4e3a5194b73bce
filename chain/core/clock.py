"""A wall clock for deadlines that does not jump.

The jobs plan in wall-clock seconds (Slurm's end time is one), but measure
durations against them: if the system clock is stepped (NTP, an admin), a
deadline read from ``time.time()`` would move with it and the app would be
stopped early, or too late to checkpoint before Slurm's kill. ``steady_clock``
reads the wall clock once and then advances by the monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def steady_clock(
    wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic
) -> Callable[[], float]:
    """Wall-clock seconds as of now, advancing with ``monotonic`` only."""
    anchor_wall, anchor_mono = wall(), monotonic()
    return lambda: anchor_wall + (monotonic() - anchor_mono)
