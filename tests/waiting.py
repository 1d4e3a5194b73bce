"""Wait for an event, not for a fixed time: on a loaded 2-core machine a
"sleep 0.3 s, then assert" flakes; polling the event with a generous bound
does not (and costs only as long as the event takes).

    from waiting import wait_until
    info = wait_until(lambda: backend.query([job]).get(job), timeout=20, what=f"job {job} known")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

GENEROUS = 30.0  # seconds: far beyond any event's normal delay, short enough to fail a hung test


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = GENEROUS,
    *,
    interval: float = 0.05,
    what: str = "",
    describe: Callable[[], object] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Raises AssertionError after ``timeout`` seconds, naming ``what`` and, if
    given, ``describe()`` (the state that was waited on)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f": {describe()}" if describe is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or predicate!r}{detail}")
        time.sleep(interval)
