"""Watching the current runner until its outcome is known.

The outcome comes from the runner's own record (a local ``stat``, no
scheduler call); the scheduler is asked only to catch a runner that died
without a record, on the poll policy's schedule (``core.poll``): rarely while
the runner is far from its end, more often near it. Its accounting (sacct:
slurmdbd, no slurmctld RPC) answers wherever its lag cannot mislead
(``RunnerWatch._look``): an end for good, a start the runner's record
confirms, a runner not started yet, an ended runner's final state; slurmctld
is asked otherwise, and once before the next runner is queued
(``left_queue``).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from chain.backends.base import Backend, JobInfo
from chain.core.decision import Outcome
from chain.core.exclusion import asks_node_states
from chain.core.model import JobState
from chain.core.outcome import runner_outcome
from chain.core.poll import PollPolicy, StepAside
from chain.core.records import RunnerPhase, RunnerRecord
from chain.errors import CheckpointError, SchedulerError
from chain.store import ChainDir, ChainStatus, read_counter
from chain.store.counter import CounterReading


class HandOver(Exception):
    """The submitter reached its margin while waiting: a successor takes over."""


class Preempted(HandOver):
    """Slurm preempts the submitter: a successor takes over at once."""


class StepAsideNow(HandOver):
    """The runner waits for resources: a successor takes over when it starts."""

    def __init__(self, runner_job_id: str) -> None:
        super().__init__(runner_job_id)
        self.runner_job_id = runner_job_id


class _Look(enum.Enum):
    """What ``RunnerWatch.outcome_of`` does after a look that found no outcome."""

    AGAIN = "read the runner's record again at once"
    WAIT = "wait, then look again"


@dataclass
class _Asking:
    """When ``RunnerWatch.outcome_of`` asks the scheduler next, since when
    it has said PENDING for a runner with no record yet, and when the
    watch began (accounting's silence is believed only for a while after)."""

    next_query: float
    pending_since: float | None = None
    began: float = 0.0
    confirmed: float = 0.0  # when slurmctld last answered (or the watch began)


@dataclass
class RunnerWatch:
    """Waits for one runner's outcome; ``deadline`` is when to hand over."""

    chain: ChainDir
    backend: Backend
    ckpt: Path
    poll: PollPolicy = field(default_factory=PollPolicy)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    deadline: float = float("inf")
    on_running: Callable[[ChainStatus], None] = lambda status: None  # lookahead's pre-queue
    on_wait: Callable[[], None] = lambda: None  # at every look while waiting (the submitter's own end)
    step_aside: StepAside = field(default_factory=lambda: StepAside(patience=0))  # never, unless the submitter says
    ckpt_path: str = ""  # CKPT_PATH as configured, for a reason that names it ("": the file's name)
    # the counter with its facts (store.counter.read_counter_state), when not the file ckpt
    read: Callable[[], CounterReading] | None = None
    fresh_job: str = ""  # the runner job this submitter has just queued
    leaving: str = ""  # an ended runner's job that may still be in slurmctld's queue

    def outcome_of(self, status: ChainStatus) -> Outcome:
        """Wait until the current runner has ended; its outcome."""
        job_id = status.runner_job_id
        self.chain.log(f"waiting for runner {status.runner_seq} (job {job_id})")
        asking = self._first_asking(job_id)
        while True:
            record = self.chain.runner_record(job_id)
            if record is not None and record.ended:
                ended = None if record.preempted else self._accounted_end(job_id)
                if ended is not None:
                    self.leaving = job_id  # perhaps still COMPLETING: ``left_queue`` before the next runner
                    return self.outcome(status, record, ended)
                return self.outcome(status, record, self.until_gone(job_id, requeued=record.preempted))
            self.on_wait()
            now = self.clock()
            if record is not None and record.status is RunnerPhase.RUNNING:
                self.on_running(status)
            if now >= asking.next_query:
                answer = self._ask(status, record, now, asking)
                if answer is _Look.AGAIN:
                    continue
                if isinstance(answer, Outcome):
                    return answer
            if now >= self.deadline:
                raise HandOver()
            self.sleep(self.poll.file_interval)

    def _first_asking(self, job_id: str) -> _Asking:
        """A runner adopted from another job is asked about at once (it may
        be long gone). One this job has just queued is pending, as sbatch
        said: the first ask is due when stepping aside would be, else at the
        longest interval (its start record comes first if it starts)."""
        now = self.clock()
        if job_id != self.fresh_job:
            return _Asking(next_query=now, began=now, confirmed=now)
        planned = self.poll.next_slurm_query(now, None)
        return _Asking(next_query=self.step_aside.next_query(now, planned), pending_since=now, began=now, confirmed=now)

    def _look(self, job_id: str, record: RunnerRecord | None, now: float, asking: _Asking) -> JobInfo | None:
        """The runner's job as the scheduler shows it: accounting's word
        (slurmdbd, no slurmctld RPC) where its lag cannot mislead, else
        slurmctld's. Accounting's lag shows a job's start or end late:
        - an end for good (not one Slurm may requeue) is taken as it is;
        - RUNNING is taken while the runner's record says it runs and its
          planned end is ahead: lag can only delay noticing a death the
          runner did not record, never invent one; slurmctld is asked at
          least every ``PollPolicy.slurmctld_every`` seconds all the same
          (accounting can fall far behind: slurmdbd draining a backlog);
        - for a runner with no record yet, the job absent there (pending:
          accounting may show a job only once it starts), PENDING or
          RUNNING (its record comes first thing) is taken as it is, for the
          poll policy's longest interval after the watch began: one that
          died unrecorded shows in accounting within seconds, and slurmctld
          is asked once that interval has passed."""
        known = self.backend.accounted([job_id])
        if known is not None:
            info = known.get(job_id)
            if info is not None and info.state.for_good:
                return info
            if record is None and (info is None or info.state in (JobState.PENDING, JobState.RUNNING)):
                if now < asking.began + self.poll.slurm_max:
                    return info or JobInfo(job_id, JobState.PENDING, source="sacct")
            elif info is not None and info.state is JobState.RUNNING and _runs_until(record, now, asking, self.poll):
                return info
        asking.confirmed = now
        return self.backend.query([job_id]).get(job_id)

    def _accounted_end(self, job_id: str) -> JobInfo | None:
        """The runner recorded its end; its job is still leaving (the
        process exits after writing the record). Its end for good as
        accounting shows it, asking nothing of slurmctld, waited for at most
        the poll policy's ``accounting_delays``; None when accounting does not
        show one by then (or Slurm may requeue the job): ``until_gone`` asks
        slurmctld then."""
        for delay in self.poll.accounting_delays():
            try:
                known = self.backend.accounted([job_id])
            except SchedulerError:  # a job id it refuses to ask about: slurmctld's path says why
                return None
            if known is None:
                return None  # no accounting here
            info = known.get(job_id)
            if info is not None and info.state.finished:
                return info if info.state.for_good else None
            self.sleep(delay)
        return None

    def left_queue(self) -> None:
        """Before the next runner is queued: the runner whose end came from
        accounting has left slurmctld's queue too (accounting shows a job
        ended while it may still be COMPLETING), so two runners of the chain
        never show in squeue at once. Usually one query; none when the
        chain ended with that runner (no next one is queued). Bounded by the
        first ~2 s of the handoff schedule: accounting already shows the end."""
        job_id, self.leaving = self.leaving, ""
        delays = self.poll.accounting_delays()
        if job_id and (info := self._settled(job_id, None, delays)) is not None and info.state.active:
            self.chain.log(f"runner job {job_id} is still {info.state.value} after its end; queueing the next anyway")

    def _ask(self, status: ChainStatus, record: RunnerRecord | None, now: float, asking: _Asking) -> Outcome | _Look:
        """One look at the runner's job in the scheduler: its outcome when the
        job has gone without an end record; else what to do next (``asking``
        says when to look again)."""
        job_id = status.runner_job_id
        try:
            info = self._look(job_id, record, now, asking)
        except SchedulerError as exc:
            # the scheduler is down: the runner goes on regardless; keep
            # watching its record and ask again later
            self.chain.log(f"query of runner {job_id} failed: {exc}")
            asking.next_query = now + self.poll.slurm_min
            return _Look.AGAIN
        if info is None or info.state.finished:
            record = self.chain.runner_record(job_id)
            if record is not None and record.ended:
                return _Look.AGAIN
            return self.outcome(status, record, info)
        waiting = record is None and info.state is JobState.PENDING
        asking.pending_since = (now if asking.pending_since is None else asking.pending_since) if waiting else None
        if self.step_aside.due(asking.pending_since, now) and self.chain.runner_record(job_id) is None:
            raise StepAsideNow(job_id)  # (the record read again: it may have started since)
        asking.next_query = self.step_aside.next_query(
            asking.pending_since, self.poll.next_slurm_query(now, record.end_planned if record else None)
        )
        return _Look.WAIT

    def until_gone(self, job_id: str, *, requeued: bool = False) -> JobInfo | None:
        """The runner recorded its end; wait (briefly) for its job to leave
        the queue, so the next runner never overlaps it in squeue.

        A job still queued after that outlived its own end record: Slurm
        requeued it (preemption, node failure), or it hangs. The record is
        the outcome; the chain cancels the job (a requeue hold is not waited
        out) and waits for it to go. Slurm's state (CANCELLED by us) then
        says nothing about the runner: the answer is the job REQUEUED."""
        # ``requeued``: the runner recorded that Slurm took it back: one look,
        # and a copy back in the queue is cancelled at once
        info = self._settled(job_id, None, self.poll.handoff_delays()[:1] if requeued else None)
        if info is None or not info.state.active:
            return info
        self.chain.log(
            f"runner job {job_id} is still {info.state.value} after recording its end (requeued?); cancelling it"
        )
        try:
            self.backend.cancel(job_id)
        except SchedulerError as exc:
            self.chain.log(f"cancel of runner {job_id} failed: {exc}")
        self._settled(job_id, info)
        if info.state is JobState.COMPLETING:
            return None  # it hangs on its way out (an epilog): not back in the queue
        return JobInfo(job_id, JobState.REQUEUED, reason="requeued after its end record; cancelled by chain")

    def _settled(self, job_id: str, last: JobInfo | None, delays: list[float] | None = None) -> JobInfo | None:
        """Ask on the handoff schedule (or ``delays``) until the job has left
        the queue; the last answer (``last`` if none came)."""
        for delay in self.poll.handoff_delays() if delays is None else delays:
            try:
                # the record has the exit code: Slurm's state is all that is asked
                last = self.backend.query([job_id], exit_codes=False).get(job_id)
            except SchedulerError as exc:
                self.chain.log(f"query of runner {job_id} failed: {exc}")
                self.sleep(delay)
                continue
            if last is None or last.state.finished:
                return last
            self.sleep(delay)
        return last

    def outcome(self, status: ChainStatus, record: RunnerRecord | None, info: JobInfo | None) -> Outcome:
        """The runner's outcome from its record and ``info``, with the counter as it is now."""
        outcome = gather_outcome(self.chain, status, record, info, self._reading(), self.ckpt_path or self.ckpt.name)
        return with_nodes_down(self.chain, self.backend, outcome, record)

    def _reading(self) -> CounterReading | None:
        """The counter as it is now; None when it cannot be read (the
        runner's record, or the next reading, tells why)."""
        try:
            if self.read is not None:
                return self.read()
            return CounterReading(read_counter(self.ckpt), self.ckpt.exists(), self.ckpt)
        except CheckpointError:
            return None


def _runs_until(record: RunnerRecord | None, now: float, asking: _Asking, poll: PollPolicy) -> bool:
    """The runner's record says it runs, with its planned end still ahead,
    and slurmctld was asked lately enough (``PollPolicy.slurmctld_every``)."""
    if record is None or record.status is not RunnerPhase.RUNNING:
        return False
    return now < (record.end_planned or 0.0) and now < asking.confirmed + poll.slurmctld_every


def gather_outcome(
    chain: ChainDir,
    status: ChainStatus,
    record: RunnerRecord | None,
    info: JobInfo | None,
    reading: CounterReading | None,
    counter_name: str,
) -> Outcome:
    """The current runner's outcome (``core.outcome.runner_outcome``) with
    the facts gathered here: whether ``chain cancel`` asked, and the counter
    ``reading`` (None: unreadable), named ``counter_name`` when it is
    missing. Before it is judged for good: ``with_nodes_down``."""
    missing = "" if reading is None or reading.present else counter_name
    return runner_outcome(
        status,
        record,
        info,
        cancelled=chain.cancel_requested(),
        counter=None if reading is None else reading.value,
        missing_counter_file=missing,
    )


def with_nodes_down(chain: ChainDir, backend: Backend, outcome: Outcome, record: RunnerRecord | None) -> Outcome:
    """``outcome`` with the runner's nodes the scheduler shows down, asked
    (one sinfo) only when the exclusion rule needs it
    (``core.exclusion.asks_node_states``); unchanged when it cannot say."""
    nodes = record.nodes if record else []
    if not asks_node_states(nodes, failed=outcome.failed_on_node, taken_back=outcome.taken_back):
        return outcome
    try:
        down = backend.down_nodes(nodes)
    except SchedulerError as exc:
        chain.log(f"could not ask which of the nodes {','.join(nodes)} are down: {exc}")
        return outcome
    return replace(outcome, nodes_down=tuple(n for n in nodes if n in down))
