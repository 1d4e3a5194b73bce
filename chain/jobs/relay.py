"""Relay mode: no driver job. Each runner, when it starts, judges its
predecessor with the submitter's decision core (``core.decision`` through
``effects.ending``), then either becomes the current runner and queues its
successor behind itself (``--dependency=afterany``) before it runs the app,
or ends the chain (hooks included) without running the app. A runner whose
own outcome ends the chain (MAX_ITER reached, a failure of the app) ends it
itself and cancels its queued successor. A runner its predecessor's pace
shows completing the chain queues none at its start, and one later only if
that guess proves wrong (``Relay._defer_until``).

Only the judgment and the take-over hold the chain directory's lock (so
``chain cancel``, ``chain status`` and ``submit --resume`` see a consistent
relay); hooks run outside it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from chain.backends.base import Backend, JobInfo, JobState, resubmission
from chain.core.decision import (
    Decision,
    Outcome,
    Policy,
    Tally,
    Verdict,
    cancelled_outside,
    decide,
)
from chain.core.events import (
    CounterRead,
    RelayBroken,
    RelayTookOver,
    SuccessorForgotten,
    SuccessorQueued,
    SuccessorTaken,
)
from chain.core.model import ChainState
from chain.core.names import runner_job_name
from chain.core.protocol import is_current_runner
from chain.core.reasons import ReasonKind
from chain.core.records import RunnerRecord
from chain.core.runner_rules import SURE_SHARE, app_pace, completes_here, look_fresh, successor_look_at
from chain.core.settings import Settings
from chain.effects.ending import complete_chain, end_chain, record_judgment
from chain.effects.executor import Executor
from chain.effects.runners import submit_runner, submit_runner_job
from chain.errors import ChainError, CheckpointError, SchedulerError
from chain.jobs.supervise import Due
from chain.jobs.watch import RunnerWatch, gather_outcome, with_nodes_down
from chain.store import ChainDir, ChainStatus
from chain.store.counter import (
    CounterReading,
    counter_source,
    read_chain_counter,
    read_counter_state,
)

# states after which Slurm may requeue a job (preemption, a node's failure): asked of slurmctld, not accounting
QUERY_PATIENCE = 300.0  # seconds a runner rides out a scheduler outage to judge its predecessor
SUBMIT_PATIENCE = 300.0  # seconds it keeps trying to queue its successor
AFTER_APP_RESERVE = 3.0  # seconds before its end a runner stops trying to queue a successor after its app


class Turn(str, enum.Enum):
    """What a relay runner does at its turn (``Relay.take_over``, ``after_app``)."""

    RUN = "run"  # this runner is the current one: run the app
    LEAVE = "leave"  # not this runner's turn (superseded, ended chain, predecessor requeued)
    COMPLETE = "complete"  # the counter reached MAX_ITER: hooks, completed
    END = "end"  # the decision ended the chain (failed, stopped, cancelled)


@dataclass
class TakeOver:
    step: Turn
    status: ChainStatus | None = None
    why: str = ""
    state: ChainState = ChainState.RUNNING
    kind: ReasonKind | None = None  # what ``why`` says, where one names it
    # RUN with no successor queued (``Relay._defer_until``): when to queue it if the app still runs
    deferred_until: float | None = None


@dataclass(frozen=True)
class SuccessorLook:
    """Accounting asked about the queued successor ``job`` at ``asked``
    while the app ran (``Relay.look_at_successor``); its answer when called."""

    job: str
    asked: float
    answer: Callable[[], Mapping[str, JobInfo] | None]


@dataclass
class Relay:
    """One runner's part in a relay chain (``run`` in ``jobs.runner`` calls
    ``take_over`` before the app and ``after_app`` after it)."""

    chain: ChainDir
    settings: Settings
    backend: Backend
    workdir: Path
    job_id: str
    seq: int | None
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    job_end: float = float("inf")  # this job's own end: hooks must be done by then
    limit_end: float = float("inf")  # its start and configured limit: the app stops by the earlier of the two
    # accounting's lines at this job's start (``RelayMode.runner_look``); None: not looked
    known: Mapping[str, JobInfo] | None = None
    successor_look: SuccessorLook | None = None  # asked beside the app, for the check after it

    def __post_init__(self) -> None:
        self.executor = Executor(self.chain, self.backend, self.clock, self.sleep)

    # --- before the app ------------------------------------------------------------
    def take_over(self) -> TakeOver:
        """Judge the predecessor and become the chain's current runner, or say
        why not. Under the chain directory's lock; the ending (hooks) is the
        caller's, outside it (``finish``)."""
        with self.chain.locked(wait=120.0):
            status = self.chain.load_status()
            if status is None or status.state.ended:
                return TakeOver(Turn.LEAVE, status, "the chain has ended")
            if self.chain.cancel_requested():
                return TakeOver(Turn.LEAVE, status, "the chain is being cancelled")
            deferred_until = None
            if status.queued_next(self.job_id, self.seq):
                predecessor = status.runner_job_id
                verdict = self._judge_predecessor(status)
                if verdict is not None:
                    return verdict
                verdict = self._become_current(status)
                if verdict is not None:
                    return verdict
                deferred_until = self._defer_until(status, predecessor)
            elif not is_current_runner(status, self.job_id, self.seq):
                return TakeOver(Turn.LEAVE, status, "not the chain's current runner")
            self.executor.apply(status, RelayTookOver(self.job_id, self.seq))
            if deferred_until is None and not status.next_job_id:
                self.queue_successor(status)
            return TakeOver(Turn.RUN, status, deferred_until=deferred_until)

    def _judge_predecessor(self, status: ChainStatus) -> TakeOver | None:
        """The predecessor's outcome, decided as the submitter would; a
        TakeOver when the chain does not go on through this runner."""
        if not status.runner_live:
            return None  # judged already (a resumed chain, or it ended itself)
        job = status.runner_job_id
        watch = RunnerWatch(
            self.chain,
            self.backend,
            self.workdir / self.settings.ckpt_path,
            clock=self.clock,
            sleep=self.sleep,
            ckpt_path=counter_source(self.settings),
            read=self._read_counter,
        )
        record = self.chain.runner_record(job)  # final: this job starts after its predecessor's end
        info = self._predecessor_state(job, record)
        if info is not None and info.state.active:
            if record is None or not record.ended:
                # Slurm requeued it (node failure): it runs again as the current
                # runner and queues a successor then; this job steps aside
                self.executor.apply(status, SuccessorForgotten())
                return TakeOver(Turn.LEAVE, status, f"predecessor job {job} was requeued and runs again")
            # requeued after recording its end: cancelled (at one look when it recorded its preemption)
            info = watch.until_gone(job, requeued=record.preempted)
        outcome = watch.outcome(status, record, info)
        decision = self._decide(outcome, status)
        record_judgment(self.executor, self.settings, status, outcome, decision)
        if decision.verdict is Verdict.STOP:
            self.executor.apply(status, SuccessorTaken())  # this job: it ends the chain, nothing to cancel
            return TakeOver(Turn.END, status, decision.reason, decision.state, decision.kind)
        return None

    def _become_current(self, status: ChainStatus) -> TakeOver | None:
        self.executor.apply(status, SuccessorTaken())
        try:
            counter = read_chain_counter(self.settings, self.workdir)
        except CheckpointError as exc:
            return TakeOver(Turn.END, status, str(exc), ChainState.STOPPED)
        self.executor.apply(status, CounterRead(counter))
        if counter >= self.settings.max_iter:
            return TakeOver(Turn.COMPLETE, status)
        submit_runner(self.executor, status, counter, self.settings.max_iter, self.clock(), lambda _name: self.job_id)
        return None

    def _defer_until(self, status: ChainStatus, predecessor: str) -> float | None:
        """When this runner queues its successor if its app still runs then
        (its predecessor's pace shows the app bringing the chain to MAX_ITER
        by that time, half its app's; ``core.runner_rules.completes_here``),
        logged; None: queued now, as always. Queued also when the app ends
        short of MAX_ITER (``after_app``), a signal from outside ends it, or
        the runner fails, or is requeued after its end (``RelayMode.rerun_after_end``)."""
        if not predecessor or status.next_job_id:
            return None
        try:
            record = self.chain.runner_record(predecessor)
        except ChainError:  # unreadable: the successor is queued as always
            return None
        if record is None:
            return None
        pace = app_pace(record.iter_before, record.iter_after, record.app_start, record.end)
        now = self.clock()
        app_seconds = min(self.job_end, self.limit_end) - self.settings.stop_margin(status.margin) - now
        if not completes_here(status.iteration, self.settings.max_iter, pace, app_seconds):
            return None
        self.chain.log(
            f"relay: runner {status.runner_seq + 1} not queued: at runner job {predecessor}'s pace "
            f"({pace:.3g} iterations/s) this one reaches {self.settings.max_iter} from {status.iteration} "
            f"within half its {app_seconds:.0f} s; queued if its app runs longer or the chain goes on"
        )
        return now + app_seconds * SURE_SHARE

    # --- beside the app ------------------------------------------------------------
    def due_beside_app(self, take: TakeOver, stop_at: float) -> Due | None:
        """What the supervision does once while the app runs unsignalled
        (``jobs.supervise.Due``): queue the successor this runner deferred, at
        half time; else ask accounting about the queued one shortly before the
        stop signal (``core.runner_rules.successor_look_at``), so that the
        check after the app (``after_app``) does not wait for slurmdbd."""
        if take.deferred_until is not None:
            return Due(take.deferred_until, self.queue_deferred)
        job = take.status.next_job_id if take.status is not None else ""
        return Due(successor_look_at(stop_at), lambda _until: self.look_at_successor(job)) if job else None

    def look_at_successor(self, job: str) -> None:
        """Start accounting's look at the queued successor ``job``; its answer
        is taken after the app while fresh (``core.runner_rules.look_fresh``)."""
        try:
            self.successor_look = SuccessorLook(job, self.clock(), self.backend.accounted_later([job]))
        except ChainError:  # an id accounting must not be given: refused again, in its words, after the app
            self.successor_look = None

    def queue_deferred(self, until: float | None = None) -> None:
        """Queue a successor for this runner if the chain still needs one
        from it (it deferred it, ``_defer_until``, or the relay broke): it is
        the current runner, nothing is queued behind it and no ``chain
        cancel`` is at work. Tries until ``until`` (beside the app: its stop
        time, so the stop signal is not held up), else shortly before this
        job's end. Never raises: it runs beside the app and on a runner's
        way out (what it could not do is logged; ``after_app`` tries again,
        ``chain status`` tells a chain left with nothing queued)."""
        give_up = self._give_up(SUBMIT_PATIENCE, AFTER_APP_RESERVE) if until is None else until
        try:
            with self.chain.locked(wait=max(0.0, min(10.0, give_up - self.clock()))):
                status = self.chain.load_status()
                if status is not None and is_current_runner(status, self.job_id, self.seq):
                    self._leave_to_successor(status, give_up)
        except Exception as exc:  # noqa: BLE001 - beside the app or on the way out: logged, never raised
            self.chain.log(f"relay: could not queue a runner behind job {self.job_id}: {exc}")

    def _read_counter(self) -> CounterReading:
        return read_counter_state(self.settings, self.workdir)

    def _reading(self) -> CounterReading | None:
        """The counter as it is now; None when unreadable (the runner's record tells why)."""
        try:
            return self._read_counter()
        except CheckpointError:
            return None

    def _decide(self, outcome: Outcome, status: ChainStatus) -> Decision:
        return decide(
            outcome,
            Policy(self.settings.max_iter, self.settings.retries),
            Tally(status.no_progress, status.retries_used),
        )

    def _give_up(self, patience: float, reserve: float) -> float:
        """When a retry stops: after ``patience``, and ``reserve`` (before
        the app: the margin) before this job's own end, so that a short runner
        slowed by an outage still records its end and runs its app instead
        of being killed by its limit with no record (judged as a timeout then)."""
        return min(self.clock() + patience, self.job_end - reserve)

    def _predecessor_state(self, job: str, record: RunnerRecord | None) -> JobInfo | None:
        """The predecessor's state for its judgment. When it recorded its own
        end (not a preemption), accounting's final state is enough, at no
        slurmctld RPC: its lag shows a job that just ended as still running,
        so only a final state is taken, else slurmctld is asked. A state
        after which Slurm may requeue the job (preempted, node failure) is
        asked of slurmctld too; a copy requeued later anyway finds its end
        record when it starts and leaves without running the app (``jobs.runner``)."""
        if record is not None and record.ended and not record.preempted:
            known = self.known if self.known is not None and job in self.known else self.backend.accounted([job])
            info = known.get(job) if known else None
            if info is not None and info.state.for_good:
                return info
        return self._query(job, exit_codes=record is None or not record.ended)

    def _query(self, job: str, *, exit_codes: bool) -> JobInfo | None:
        """The predecessor's final state, through a scheduler outage (bounded);
        its exit code only when it wrote no record of it."""
        try:
            return self.executor.retry(
                f"relay: query of job {job}",
                lambda: self.backend.query([job], exit_codes=exit_codes).get(job),
                self._give_up(QUERY_PATIENCE, self.settings.runner_margin),
            )
        except SchedulerError as exc:
            # judged from its record alone (no record: its state is unknown)
            self.chain.log(f"relay: could not ask the scheduler about job {job}: {exc}")
            return None

    def queue_successor(self, status: ChainStatus, *, give_up: float | None = None) -> None:
        """Queue the next runner behind this one. Retried and looked up by its
        unique name (never queued twice); a final failure is recorded
        (``relay_broken``: the chain is stalled, ``chain status`` says so)
        and the app runs regardless: its work is not lost. The retries stop
        at ``give_up``; by default at the app's stop time (before the app)."""
        name = runner_job_name(status.chain_id, status.runner_seq + 1)
        submit = resubmission(
            self.backend,
            name,
            lambda: submit_runner_job(
                self.chain, self.backend, status, name, self.workdir, dependency=f"afterany:{self.job_id}"
            ),
        )

        if give_up is None:
            give_up = self._give_up(SUBMIT_PATIENCE, self.settings.runner_margin)
        try:
            job_id = self.executor.retry(f"relay: queueing runner {status.runner_seq + 1}", submit, give_up)
        except SchedulerError as exc:
            self.executor.apply(status, RelayBroken(f"could not queue runner {status.runner_seq + 1}: {exc}"))
            return
        # its id joins worker_ids.txt when it takes over (effects.runners)
        self.executor.apply(
            status,
            SuccessorQueued(
                job_id, f"relay: runner {status.runner_seq + 1} queued as job {job_id} behind job {self.job_id}"
            ),
        )

    # --- after the app -----------------------------------------------------------------
    def after_app(self, record: RunnerRecord) -> TakeOver:
        """This runner's own outcome, judged here when it ends the chain (the
        successor need not start for that); a handoff, or an outcome that
        needs Slurm's final state (a signal from outside: the user's scancel
        or the time limit), is left to the successor's judgment."""
        with self.chain.locked(wait=120.0):
            status = self.chain.load_status()
            if status is None or not is_current_runner(status, self.job_id, self.seq):
                return TakeOver(Turn.LEAVE, status)
            if record.external_signal:
                self._leave_to_successor(status)
                if record.preempted and status.next_job_id:
                    self._release(status.next_job_id)
                return TakeOver(Turn.LEAVE, status)
            # the nodes' states are asked only where this job judges (a handoff leaves it to the successor)
            outcome = gather_outcome(
                self.chain,
                status,
                record,
                None,
                self._reading(),
                counter_source(self.settings) or Path(self.settings.ckpt_path).name,
            )
            decision = self._decide(outcome, status)
            if decision.verdict is Verdict.CONTINUE and outcome.iter_after < self.settings.max_iter:
                if not status.next_job_id:
                    self._leave_to_successor(status)
                elif not self.chain.cancel_requested() and self._successor_cancelled(status.next_job_id):
                    # the user's scancel of the queued successor: no job of the chain would judge
                    # this runner, and `chain status` only reads; the chain ends here, cancelled
                    self._judge_own(status, outcome, record)
                    return TakeOver(
                        Turn.END,
                        status,
                        cancelled_outside(status.next_job_id),
                        ChainState.CANCELLED,
                        ReasonKind.CANCELLED_BY_USER,
                    )
                return TakeOver(Turn.LEAVE, status)
            decision = self._judge_own(status, outcome, record)
            if decision.verdict is Verdict.STOP:
                return TakeOver(Turn.END, status, decision.reason, decision.state, decision.kind)
            return TakeOver(Turn.COMPLETE, status)

    def _leave_to_successor(self, status: ChainStatus, give_up: float | None = None) -> None:
        """The current runner, whose outcome its successor judges, with none
        queued (deferred at its start, ``_defer_until``, or the relay broke
        there): queue one now, trying until ``give_up`` (by default shortly
        before this job's end), unless ``chain cancel`` is at work."""
        if status.next_job_id or self.chain.cancel_requested():
            return
        self.chain.log(f"relay: queueing runner {status.runner_seq + 1}: runner job {self.job_id} has none")
        if give_up is None:
            give_up = self._give_up(SUBMIT_PATIENCE, AFTER_APP_RESERVE)
        self.queue_successor(status, give_up=give_up)

    def _judge_own(self, status: ChainStatus, outcome: Outcome, record: RunnerRecord) -> Decision:
        """Judge this runner for good, the nodes' states asked when the rule needs them."""
        outcome = with_nodes_down(self.chain, self.backend, outcome, record)
        decision = self._decide(outcome, status)
        record_judgment(self.executor, self.settings, status, outcome, decision)
        return decision

    def _release(self, job: str) -> None:
        """This runner was preempted: its queued successor (``afterany`` on
        this job) starts without waiting for it, since a requeued copy of
        this job would hold it for Slurm's requeue delay (~2 min); the
        successor cancels that copy when it judges this runner."""
        try:
            self.backend.release(job)
        except SchedulerError as exc:
            self.chain.log(f"relay: could not release the queued runner job {job}: {exc}")
            return
        self.chain.log(
            f"relay: runner job {self.job_id} preempted: queued runner job {job} released from "
            "its dependency, to start without waiting out a requeue"
        )

    def _successor_cancelled(self, job: str) -> bool:
        """The queued successor was cancelled outside chain: accounting's word
        (no slurmctld RPC at every handoff; a cancel it does not show yet is
        the same race as a cancel just after this look: ``chain status`` then
        tells the chain has nothing queued), else one query; a scheduler
        that does not answer leaves the handoff as it is."""
        look = self.successor_look
        if look is not None and look.job == job and look_fresh(look.asked, self.clock()):
            known = look.answer()
        else:
            known = self.backend.accounted([job])
        if known is not None and job in known:
            return known[job].state is JobState.CANCELLED
        try:
            info = self.backend.query([job], exit_codes=False).get(job)
        except SchedulerError as exc:
            self.chain.log(f"relay: could not ask the scheduler about the queued runner job {job}: {exc}")
            return False
        return info is not None and info.state is JobState.CANCELLED

    # --- endings -------------------------------------------------------------------------
    def finish(self, take: TakeOver) -> None:
        """Carry out a COMPLETE or END: cancel the queued successor, run the
        hooks within this job's remaining time, mark the chain ended. The
        report is the short one (``effects.hooks.plan_hooks``): this job
        holds a slot another chain of a sweep may wait for."""
        status = take.status
        if status is None or take.step not in (Turn.COMPLETE, Turn.END):
            return
        timeout = max(10.0, self.job_end - self.clock() - 15.0)
        if take.step is Turn.COMPLETE:
            from chain.effects.runners import drop_next

            drop_next(self.executor, status)
            complete_chain(
                self.executor, status, self.settings, self.workdir, self.clock(), hook_timeout=timeout, job_report=True
            )
        else:
            end_chain(
                self.executor,
                status,
                self.settings,
                self.workdir,
                take.state,
                take.why,
                kind=take.kind,
                hook_timeout=timeout,
                job_report=True,
            )
