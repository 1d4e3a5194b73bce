"""SIGTERM in the submitter: Slurm's preemption (or the job's time limit, or
someone's scancel) signals the job and gives it KillWait (or GraceTime)
before SIGKILL. The submitter must hear it in time to hand over, but never
be torn out of a state write or an sbatch: the signal becomes an exception
only where the submitter waits (``TermCatcher.sleep``) or at the top of its
loop (``check``)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType


def restart_count(environ: Mapping[str, str]) -> int:
    """How often Slurm had restarted (requeued) the job when this process
    started (``SLURM_RESTART_COUNT``; 0 when unset)."""
    value = environ.get("SLURM_RESTART_COUNT", "")
    return int(value) if value.isdigit() else 0


class Terminated(Exception):
    """SIGTERM reached the submitter."""


@dataclass
class TermCatcher:
    sleep_: Callable[[float], None] = time.sleep
    received: bool = False
    _waiting: bool = False

    def install(self) -> Callable[[], None]:
        """Catch SIGTERM (main thread only; elsewhere nothing is caught);
        returns what puts the previous handler back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = signal.signal(signal.SIGTERM, self._on_term)

        def restore() -> None:
            signal.signal(signal.SIGTERM, previous)

        return restore

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        if self._waiting:
            raise Terminated()

    def check(self) -> None:
        if self.received:
            raise Terminated()

    def sleep(self, seconds: float) -> None:
        """Sleep, unless SIGTERM came (before or during): then Terminated."""
        self.check()
        self._waiting = True
        try:
            self.sleep_(seconds)
        finally:
            self._waiting = False
