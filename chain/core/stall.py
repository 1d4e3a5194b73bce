"""The stall watchdog's rule: an app whose signs of progress have
not changed for ``timeout`` seconds is stalled (a hung collective, a dead
file system). Pure: the signs come from an injected ``probe`` (the runner's
looks at the counter, the app's output, its iteration log and its heartbeat
file), the time from the caller."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field


@dataclass
class StallWatch:
    """``stalled(now)``: True once ``probe()`` has returned the same marks
    for ``timeout`` seconds; any change starts the wait again."""

    timeout: float
    probe: Callable[[], Hashable]
    _marks: Hashable = field(default=None, init=False, repr=False)
    _since: float | None = field(default=None, init=False, repr=False)

    def stalled(self, now: float) -> bool:
        marks = self.probe()
        if self._since is None or marks != self._marks:
            self._marks, self._since = marks, now
            return False
        return now - self._since >= self.timeout

    def quiet_for(self, now: float) -> float:
        """Seconds since the marks last changed (0 before the first look)."""
        return 0.0 if self._since is None else now - self._since
