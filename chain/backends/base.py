"""The scheduler interface every backend fills in.

The chain's workflow (what to submit, when to look, what an outcome means)
lives in the core; a backend only knows how to talk to one scheduler:
submit a rendered sbatch script, query jobs, find a job by name, cancel,
and account for finished jobs (``usage``, for the reports).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chain.core.model import JobInfo, JobState
from chain.core.retry import RetryPolicy, TransientError
from chain.errors import ChainError, SchedulerError

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobLimits

__all__ = ["AccountingUnavailable", "Backend", "JobInfo", "JobState", "JobUsage", "resubmission", "submit_idempotently"]


@dataclass
class JobUsage:
    """One job's accounting: what it held and used (``Backend.usage``).

    ``state`` and ``exit_code`` are as the scheduler prints them
    (``CANCELLED by 0``, ``99:0``): the report shows them so. Times are
    epoch seconds; ``elapsed`` is the allocation's wall time and ``cpu`` the
    CPU time used (summed over the job's steps), in seconds; ``max_rss`` is
    the largest resident set of any step, in bytes; ``alloc_cpus`` the CPUs
    allocated. None (or "" for ``node``) when unknown.
    """

    job_id: str
    state: str
    exit_code: str
    submit: float | None = None
    start: float | None = None
    end: float | None = None
    elapsed: float | None = None
    cpu: float | None = None
    node: str = ""
    max_rss: int | None = None
    alloc_cpus: int | None = None

    @property
    def cpu_seconds(self) -> float | None:
        """The allocation: allocated CPUs x elapsed (what the job held, used or not)."""
        if self.alloc_cpus is None or self.elapsed is None:
            return None
        return self.alloc_cpus * self.elapsed

    @property
    def queue_wait(self) -> float | None:
        if self.submit is None or self.start is None:
            return None
        return max(0.0, self.start - self.submit)

    @property
    def final(self) -> bool:
        """The job ended and its record will not change any more."""
        return JobState.parse(self.state).final


class AccountingUnavailable(SchedulerError):
    """The backend keeps no accounting, or its accounting does not answer;
    the message is the one-line reason (e.g. Slurm's "accounting storage is
    disabled")."""


class Backend(abc.ABC):
    """One scheduler. Implementations: slurm (cli), local, pyslurm."""

    name: str = "abstract"
    # True when a query costs no scheduler RPC (the local backend reads files),
    # so the submitter may look often without burdening anyone.
    cheap_queries: bool = False
    # Whether jobs run steps (srun) whose tasks the scheduler signals; the local backend's do not
    job_steps: bool = True
    # What ``usage`` answers from, as reports name it ("sacct", "local
    # backend"), and whether that is the scheduler's accounting (True), which
    # reports trust for every job, or only the backend's own job records
    # (False), which they use only for what the chain's own records lack.
    usage_source: str = ""
    accounting: bool = True

    @abc.abstractmethod
    def submit(
        self,
        script: Path,
        *,
        job_name: str,
        dependency: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        exclude: Sequence[str] = (),
    ) -> str:
        """Submit a rendered sbatch script; return the job id.

        ``job_name`` overrides the script's ``#SBATCH --job-name`` and must be
        unique per submission where the caller relies on ``find_by_name``.
        ``dependency`` is an sbatch dependency expression such as
        ``singleton`` or ``afterany:123``. ``env`` is added to the job's
        environment on top of the caller's. ``exclude``: nodes the job must
        not run on (``sbatch --exclude``; a backend with one host ignores it).
        """

    @abc.abstractmethod
    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        """State of each job; ids the scheduler no longer knows are absent.

        ``exit_codes=False``: an ended job's state may come without its exit
        code, when that saves a query (the Slurm CLI's ``sacct``); for a
        caller that has the job's own record of how it ended."""

    @abc.abstractmethod
    def find_by_name(self, job_name: str) -> list[str]:
        """Ids of jobs (any state the scheduler still remembers) with this name."""

    @abc.abstractmethod
    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        """Cancel a job, or only send it ``signal`` (e.g. ``TERM``) if given:
        to the batch script, or with ``steps_only`` to its job steps (srun's
        tasks: srun itself turns a SIGTERM into killing the step)."""

    def end_time(self, job_id: str) -> float | None:
        """Scheduled end (epoch seconds) of a running job, None if unknown:
        accounting's word where it has it (``accounted_end``, no scheduler
        RPC), else the scheduler's (``scheduler_end``)."""
        end = self.accounted_end(job_id)
        return end if end is not None else self.scheduler_end(job_id)

    @abc.abstractmethod
    def scheduler_end(self, job_id: str) -> float | None:
        """The scheduler's own word on a running job's scheduled end (epoch
        seconds), None if unknown: for a caller that has just asked
        accounting (``end_time`` asks both). One try: a runner must not
        spend its own time waiting out an outage."""

    def usage(self, job_ids: Sequence[str]) -> dict[str, JobUsage]:
        """Accounting of each job, in one batched request where the scheduler
        allows; ids without a record are absent. Raises AccountingUnavailable
        when there is no accounting to ask (this default) or it does not answer."""
        raise AccountingUnavailable(f"the {self.name} backend keeps no accounting")

    def accounted(self, job_ids: Sequence[str]) -> dict[str, JobInfo] | None:
        """The jobs' states as the scheduler's accounting last recorded them,
        at no cost to the scheduler itself, with exit codes as accounting
        prints them, and a running job's scheduled end where accounting has
        its start and limit; it may lag the scheduler by seconds (a job just
        ended can still show running), so a caller takes only what lag cannot
        make wrong. None: no accounting to ask (this default), or it did not answer."""
        return None

    def accounted_later(self, job_ids: Sequence[str]) -> Callable[[], dict[str, JobInfo] | None]:
        """``accounted``, asked now and answered when the returned function is
        called, so that a caller does other work while accounting answers
        (a runner loads its code meanwhile); this default asks only when
        called. Each call of the function gives the same answer; an error
        of ``accounted`` is no answer (None), as where it is asked at once."""

        @functools.cache
        def answer() -> dict[str, JobInfo] | None:
            try:
                return self.accounted(job_ids)
            except ChainError:
                return None

        return answer

    def query_scope(self) -> str:
        """Names the scheduler this backend asks, for job states shared
        between processes (``shared_query``: job ids are unique within it);
        "" (this default): none is shared."""
        return ""

    def accounted_end(self, job_id: str) -> float | None:
        """A running job's scheduled end as accounting shows it (its start
        plus its limit: ``accounted``), at no cost to the scheduler itself;
        None when it does not show the job running yet, or there is no
        accounting to ask: ``end_time`` asks the scheduler."""
        return scheduled_end(self.accounted([job_id]), job_id)

    def available(self) -> bool:
        """True when the scheduler answers (used by ``--backend auto``)."""
        return True

    def preempting(self, job_id: str, *, restarts: int = 0) -> bool:
        """True when the scheduler is taking the job's allocation back
        (preemption, a requeue): its SIGTERM is then not a cancel's, and the
        submitter hands over instead of leaving the chain undriven.
        ``restarts``: how often the job had been restarted when the asking
        process started (``SLURM_RESTART_COUNT``). Backends that never
        preempt: False."""
        return False

    def release(self, job_id: str) -> None:
        """Drop a queued job's dependency so it may start at once (a relay
        runner's successor, when a requeue would hold its predecessor for
        the scheduler's requeue delay). A job no longer pending is left as it
        is. Backends that never requeue: nothing to do (this default)."""

    def down_nodes(self, nodes: Sequence[str]) -> set[str]:
        """Those of ``nodes`` the scheduler shows down, draining, failed or
        not responding (asked only after a runner lost a node or stalled).
        Backends with one host: none (this default)."""
        return set()

    def job_limits(self, *, account: str = "", qos: str = "", partition: str = "") -> JobLimits | None:
        """The scheduler's enforced per-user limits on the jobs of a chain
        with this account, QOS and partition (``chain.core.limits``); None
        where there are none or they cannot be read (this default)."""
        return None


def scheduled_end(known: Mapping[str, JobInfo] | None, job_id: str) -> float | None:
    """The job's scheduled end from an answer of ``accounted`` (or of a
    query): None unless it shows the job running with an end."""
    info = (known or {}).get(job_id)
    return info.end if info is not None and info.state is JobState.RUNNING else None


def submit_idempotently(
    backend: Backend,
    job_name: str,
    submit_once: Callable[[], str],
    *,
    retry: RetryPolicy | None = None,
    look_first: bool = False,
) -> str:
    """Submit a job whose ``job_name`` is unique without ever queueing it twice.

    ``submit_once`` makes one submission. A TransientError from it (a
    timed-out sbatch may still have queued the job) is answered by looking
    the job up by its name: its id if found, else the error, which ``retry``
    (one try without it) may answer with another submission. ``look_first``
    also looks before the first try: for a caller repeating a submission
    that failed earlier.
    """

    def found() -> str | None:
        ids = backend.find_by_name(job_name)
        return ids[-1] if ids else None

    def attempt() -> str:
        try:
            return submit_once()
        except TransientError:
            known = found()
            if known is None:
                raise
            return known

    earlier = found() if look_first else None
    if earlier is not None:
        return earlier
    return retry.call(attempt) if retry is not None else attempt()


def resubmission(backend: Backend, job_name: str, submit_once: Callable[[], str]) -> Callable[[], str]:
    """``submit_idempotently`` for a caller that repeats the submission after
    a failure (an outage's retries): the first call submits at once, each
    later one looks the job up by its unique name first (it may exist anyway)."""
    attempts = 0

    def submit() -> str:
        nonlocal attempts
        attempts += 1
        return submit_idempotently(backend, job_name, submit_once, look_first=attempts > 1)

    return submit


def wait_gone(
    backend: Backend,
    job_ids: Sequence[str],
    timeout: float,
    *,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Wait (at most ``timeout`` seconds, asking every 0.5 s) until none of
    ``job_ids`` is running or queued; the caller goes on either way."""
    deadline = clock() + timeout
    while job_ids and clock() < deadline:
        if not any(info.state.active for info in backend.query(job_ids, exit_codes=False).values()):
            return
        sleep(0.5)
