"""Slurm time values: parse the six ``--time`` formats, format them back.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re

from chain.errors import ConfigError

_FORMATS = (
    "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes or days-hours:minutes:seconds"
)
_NUM = r"0*([0-9]{1,12})"  # digits bounded: a longer number is no time, never a huge int()
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[int, ...]], ...] = (
    # (pattern, seconds per captured group)
    (re.compile(rf"^{_NUM}$"), (60,)),
    (re.compile(rf"^{_NUM}:{_NUM}$"), (60, 1)),
    (re.compile(rf"^{_NUM}:{_NUM}:{_NUM}$"), (3600, 60, 1)),
    (re.compile(rf"^{_NUM}-{_NUM}$"), (86400, 3600)),
    (re.compile(rf"^{_NUM}-{_NUM}:{_NUM}$"), (86400, 3600, 60)),
    (re.compile(rf"^{_NUM}-{_NUM}:{_NUM}:{_NUM}$"), (86400, 3600, 60, 1)),
)


MAX_SECONDS = 365 * 86400  # a job limit beyond a year is a typo, not a plan


def parse_slurm_time(text: str, *, what: str = "time") -> int:
    """Seconds in a Slurm time value (``--time`` syntax).

    >>> parse_slurm_time("3:30")
    210
    >>> parse_slurm_time("1-02:03:04")
    93784

    Raises ConfigError for anything else, including ``UNLIMITED``, negative
    numbers and zero.
    """
    value = str(text).strip()
    for pattern, weights in _PATTERNS:
        match = pattern.match(value)
        if match:
            seconds = sum(int(g) * w for g, w in zip(match.groups(), weights))
            if seconds <= 0:
                raise ConfigError(f"{what} {text!r} must be longer than zero")
            if seconds > MAX_SECONDS:  # 10^20 s overflowed the runner's clock arithmetic
                raise ConfigError(f"{what} {text!r} is longer than {MAX_SECONDS // 86400} days")
            return seconds
    raise ConfigError(f"{what} {text!r} is not a Slurm time ({_FORMATS})")


def sbatch_minutes(seconds: int) -> int:
    """Slurm's limit has one-minute resolution: round up, at least one."""
    return max(1, math.ceil(seconds / 60))


def format_sbatch_time(seconds: int) -> str:
    """A ``--time`` value (D-HH:MM:SS) covering ``seconds`` in whole minutes."""
    minutes = sbatch_minutes(seconds)
    days, rem = divmod(minutes * 60, 86400)
    hours, rem = divmod(rem, 3600)
    mins = rem // 60
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:00"
    return f"{hours:02d}:{mins:02d}:00"


def format_duration(seconds: float | None) -> str:
    """Human duration for reports: ``1h02m``, ``3m05s``, ``42s``; ``-`` if None."""
    if seconds is None:
        return "-"
    total = round(seconds)
    sign = "-" if total < 0 else ""
    total = abs(total)
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    mins, secs = divmod(rem, 60)
    if days:
        return f"{sign}{days}d{hours:02d}h"
    if hours:
        return f"{sign}{hours}h{mins:02d}m"
    if mins:
        return f"{sign}{mins}m{secs:02d}s"
    return f"{sign}{secs}s"
