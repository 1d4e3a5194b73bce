"""Retry policy for transient scheduler failures (one place, every backend).

A policy is a small object built from tenacity strategies; tests inject a
fake ``sleep`` so no test really waits. tenacity is imported when a policy
is first used, not with this module: ``chain status`` never pays for it.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from chain.errors import SchedulerError

T = TypeVar("T")

# Messages of Slurm clients that mean "try again" (read from Slurm's source).
TRANSIENT_MARKERS = (
    "Socket timed out on send/recv operation",
    "Zero Bytes were transmitted or received",
    "Unable to contact slurm controller",
    "Slurm backup controller in standby mode",
    "Transport endpoint is not connected",
    "Connection refused",
    "Resource temporarily unavailable",
    "slurm_persist_conn_open_without_init",
    "Slurm temporarily unable to accept job",
    "Communication connection failure",
    "Slurmctld is busy",
    "Job submit/allocate failed: Socket timed out",
)


# A file system that refuses writes for a while: full (quota), read-only or
# immutable for a moment (an admin's chattr, a remount), a flaky NFS server.
STORAGE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EPERM, errno.EACCES, errno.EIO, errno.ESTALE, errno.EAGAIN}
)
STORAGE_PATIENCE = 120.0  # seconds the chain's own writes are repeated before they fail


def is_storage_hiccup(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


class TransientError(SchedulerError):
    """A scheduler request that may succeed if repeated."""


def is_transient(message: str) -> bool:
    return any(marker.lower() in message.lower() for marker in TRANSIENT_MARKERS)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered exponential backoff on TransientError.

    ``attempts`` and ``max_delay`` bound the whole effort: a controller down
    longer than that is the caller's problem (the submitter keeps waiting on
    its own schedule, so a long outage costs no work).
    """

    attempts: int = 8
    max_delay: float = 300.0
    initial: float = 1.0
    maximum: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    # what is worth repeating: a transient error by default; the submitter
    # rides out a whole outage (any SchedulerError) until its job's end
    retry_on: type[Exception] = TransientError
    # True when there is no time left for another try (an injected clock)
    out_of_time: Callable[[], bool] = field(default=lambda: False)
    # narrows ``retry_on`` (an OSError's errno, say); None: every one of them
    retry_when: Callable[[BaseException], bool] | None = None
    # measures ``max_delay`` when given (tests inject one); else time.monotonic
    clock: Callable[[], float] | None = None

    @classmethod
    def for_jobs(cls, submitter_margin: int) -> RetryPolicy:
        """Inside the jobs: short per-request retries (the submitter rides out
        longer outages with ``until``, keeping an eye on its hand-over)."""
        return cls(attempts=4, max_delay=min(60.0, submitter_margin / 2 + 5))

    @classmethod
    def until(cls, out_of_time: Callable[[], bool], sleep: Callable[[float], None]) -> RetryPolicy:
        """Any scheduler error, repeated (5 s, doubling to 60 s, jittered) until
        ``out_of_time()``: the submitter through an outage, until its job ends."""
        return cls(
            attempts=1 << 30,
            max_delay=float("inf"),
            initial=5.0,
            maximum=60.0,
            sleep=sleep,
            retry_on=SchedulerError,
            out_of_time=out_of_time,
        )

    @classmethod
    def for_storage(
        cls,
        sleep: Callable[[float], None] = time.sleep,
        patience: float = STORAGE_PATIENCE,
        clock: Callable[[], float] = time.monotonic,
    ) -> RetryPolicy:
        """The chain's own files: a write refused by a full, read-only or
        immutable file system (``STORAGE_ERRNOS``) is repeated (1 s, doubling
        to 15 s) for ``patience`` seconds, so a short outage neither kills a
        job nor leaves the chain undriven; anything else fails at once."""
        return cls(
            attempts=1 << 30,
            max_delay=patience,
            initial=1.0,
            maximum=15.0,
            sleep=sleep,
            retry_on=OSError,
            retry_when=is_storage_hiccup,
            clock=clock,
        )

    def call(self, fn: Callable[[], T], on_retry: Callable[[str], None] | None = None) -> T:
        """``fn()``, repeated while it fails with what the policy repeats.
        The first try is made before tenacity is imported: most calls
        succeed at once, and a runner job pays ~10 ms of its start for the
        import (``bench/sweep.py``)."""
        clock = self.clock or time.monotonic
        started = clock()
        try:
            return fn()
        except Exception as exc:
            if not (isinstance(exc, self.retry_on) and (self.retry_when is None or self.retry_when(exc))):
                raise
            first = exc
        return self._repeat(fn, first, lambda: self.out_of_time() or clock() - started >= self.max_delay, on_retry)

    def _repeat(
        self,
        fn: Callable[[], T],
        first: Exception,
        out_of_time: Callable[[], bool],
        on_retry: Callable[[str], None] | None,
    ) -> T:
        """tenacity's loop from the first failure on: it sees that failure as
        its own first attempt (its numbering and backoff unchanged);
        ``out_of_time`` bounds the whole effort, the first try included."""
        import tenacity

        tries = iter([first])

        def attempt() -> T:
            failed = next(tries, None)
            if failed is not None:
                raise failed
            return fn()

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if on_retry is not None and state.outcome is not None:
                exc = state.outcome.exception()
                on_retry(f"attempt {state.attempt_number} failed: {exc}")

        class _OutOfTime(tenacity.stop.stop_base):  # the caller's clock, not tenacity's
            def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
                return out_of_time()

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(self.retry_on)
            & tenacity.retry_if_exception(self.retry_when or (lambda exc: True)),
            stop=tenacity.stop_after_attempt(self.attempts) | _OutOfTime(),
            wait=tenacity.wait_random_exponential(multiplier=self.initial, max=self.maximum),
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying(attempt)
