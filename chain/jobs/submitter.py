"""The submitter: the chain's driver, running as a Slurm job.

A short loop: submit one runner at a time (``effects.runners``), wait for its
outcome (``jobs.watch``), decide with ``core.decision.decide``, learn the
margin (``core.margin``), pre-queue the next runner with lookahead
(``effects.runners``), hand over to a successor before its own wall-time
margin (the successor adopts the live runner: never a second one), and run
the hooks at MAX_ITER (``effects.hooks``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from chain.backends.base import Backend, resubmission
from chain.core.clock import steady_clock
from chain.core.decision import (
    Decision,
    Outcome,
    Policy,
    Step,
    Tally,
    Verdict,
    decide,
    next_step,
)
from chain.core.events import (
    CounterRead,
    HandingOver,
    RunnerFound,
    RunnerLost,
    SubmitterQueued,
    SubmitterStarted,
    SuccessorTaken,
)
from chain.core.model import ChainState
from chain.core.names import (
    SUBMITTER_SCRIPT,
    runner_job_name,
    submitter_cycle,
    submitter_job_name,
)
from chain.core.poll import PollPolicy, StepAside
from chain.core.reasons import ReasonKind
from chain.core.settings import Settings
from chain.effects.ending import complete_chain, end_chain, record_judgment
from chain.effects.executor import Executor
from chain.effects.runners import drop_next, prequeue_next, submit_runner, submit_runner_job
from chain.errors import ChainError, CheckpointError, SchedulerError
from chain.jobs.own_end import OwnEnd
from chain.jobs.sigterm import TermCatcher, Terminated
from chain.jobs.watch import HandOver, Preempted, RunnerWatch, StepAsideNow
from chain.primitives.codes import SubmitterExit
from chain.store import ChainDir, ChainStatus
from chain.store.counter import counter_source, read_chain_counter, read_counter_state

T = TypeVar("T")


@dataclass
class Submitter:
    chain: ChainDir
    settings: Settings
    backend: Backend
    workdir: Path
    job_id: str
    poll: PollPolicy = field(default_factory=PollPolicy)
    clock: Callable[[], float] = field(default_factory=steady_clock)  # deadlines that do not jump
    sleep: Callable[[float], None] = time.sleep
    job_name: str = ""  # <chain id>.s<cycle>: a requeued submitter of an older cycle leaves
    restarts: int = 0  # SLURM_RESTART_COUNT at its start: one more at a SIGTERM is a requeue

    def __post_init__(self) -> None:
        longest = float(self.settings.poll_max)
        if self.backend.cheap_queries:  # a local file read, not an RPC to slurmctld
            longest = min(longest, 5.0)
        self.poll = PollPolicy(self.poll.file_interval, min(self.poll.slurm_min, longest), longest)
        self.own_end = OwnEnd(self.backend, self.job_id, float("inf"), self.clock)  # set at the start
        self.deadline = float("inf")  # hand over to a successor from here on
        self.hard_end = float("inf")  # the job's own end: nothing can be done after it
        self.term = TermCatcher(self.sleep)  # SIGTERM raised where the submitter waits
        self.executor = Executor(self.chain, self.backend, self.clock, self.term.sleep)
        self.watch = RunnerWatch(
            self.chain,
            self.backend,
            self.workdir / self.settings.ckpt_path,
            self.poll,
            self.clock,
            self.term.sleep,
            on_running=self._prequeue,
            on_wait=lambda: self._settle_end(),
            step_aside=StepAside(float(self.settings.step_aside_after)),
            ckpt_path=counter_source(self.settings),
            read=lambda: read_counter_state(self.settings, self.workdir),
        )

    # --- entry -----------------------------------------------------------------
    def run(self) -> int:
        status = self.chain.load_status()
        if status is None:
            raise ChainError(f"no chain in {self.chain.root}")
        if status.state.ended:
            self.chain.log(f"submitter {self.job_id}: chain already {status.state.value}; nothing to do")
            return SubmitterExit.DONE
        cycle = submitter_cycle(self.job_name)
        if cycle is not None and cycle < status.submitter_cycle:  # requeued after it handed over (preemption)
            self.chain.log(
                f"submitter {self.job_id} (cycle {cycle}): cycle {status.submitter_cycle} drives the chain; leaving"
            )
            return SubmitterExit.DONE
        restore = self.term.install()
        try:
            return self._drive(status)
        finally:
            restore()

    def _drive(self, status: ChainStatus) -> int:
        start = self.clock()
        self.executor.apply(status, SubmitterStarted(self.job_id))
        self._log_start(status)
        self.own_end = OwnEnd(self.backend, self.job_id, start + self.settings.submitter_seconds, self.clock)
        self._end_at(self.own_end.end)
        self._settle_end()
        try:
            return self._loop(status)
        except Terminated:
            return self._terminated(status)
        except HandOver as handover:
            try:
                self._restart(status, handover)
            except SchedulerError as exc:
                return self.stop_chain(
                    status,
                    ChainState.STOPPED,
                    f"could not submit the next submitter ({exc}); run chain submit --resume when Slurm answers again",
                    ReasonKind.HANDOVER_FAILED,
                )
            return SubmitterExit.DONE
        except SchedulerError as exc:
            return self.stop_chain(
                status,
                ChainState.STOPPED,
                f"scheduler unreachable ({exc}); run chain submit --resume when it answers again",
                ReasonKind.SCHEDULER_UNREACHABLE,
            )
        except OSError as exc:  # the chain directory refused writes past ChainDir.storage's patience
            return self._storage_failed(status, exc)

    def _terminated(self, status: ChainStatus) -> int:
        """SIGTERM: from ``chain cancel`` (its mark is there), preemption or
        this job's own end (hand over at once: the chain goes on unattended),
        or someone's scancel (leave; ``chain status`` says nothing drives the
        chain)."""
        if self.chain.cancel_requested():
            self.chain.log(f"submitter {self.job_id}: stopped by chain cancel")
            return SubmitterExit.DONE
        try:
            preempted = self.backend.preempting(self.job_id, restarts=self.restarts)
        except ChainError as exc:
            self.chain.log(f"submitter {self.job_id}: could not ask whether it is preempted: {exc}")
            preempted = False
        if not preempted and self.clock() < self.deadline:
            self.chain.log(
                f"submitter {self.job_id} got SIGTERM, not from preemption (scancel?): nothing drives "
                "the chain now; chain submit --resume continues it"
            )
            return SubmitterExit.TERMINATED
        try:
            self._restart(status, Preempted() if preempted else HandOver())
        except (SchedulerError, Terminated) as exc:
            self.chain.log(
                f"submitter {self.job_id}: could not queue a successor after SIGTERM ({exc or 'SIGTERM'}); "
                "chain submit --resume continues the chain"
            )
            return SubmitterExit.CHAIN_ENDED
        if preempted:
            self._drop_requeued_copy()
        return SubmitterExit.DONE

    def _drop_requeued_copy(self) -> None:
        """Cancel this job, whose successor runs the chain now: a copy Slurm
        would requeue (REQUEUE, a failed node) would sit in the queue for
        minutes, keep the chain's accounting open and start only to leave."""
        try:
            self.backend.cancel(self.job_id)
        except ChainError as exc:
            self.chain.log(f"submitter {self.job_id}: could not cancel its own requeued copy: {exc}")

    def _storage_failed(self, status: ChainStatus, exc: OSError) -> int:
        """Say so in the job's output and try to end the chain with the
        reason; if even that cannot be written, ``chain status`` shows the
        chain as not driven (its submitter has ended) and how to resume."""
        why = (
            f"cannot write the chain directory {self.chain.root}: {exc.strerror or exc}; "
            "run chain submit --resume when it is writable again"
        )
        print(f"chain submitter {self.job_id}: {why}", flush=True)
        try:
            return self.stop_chain(status, ChainState.STOPPED, why, ReasonKind.CHAIN_DIR_UNWRITABLE)
        except OSError:
            return SubmitterExit.CHAIN_ENDED

    def _end_at(self, end: float) -> None:
        self.deadline = end - self.settings.submitter_margin
        self.hard_end = end - min(10.0, self.settings.submitter_margin / 2)
        self.watch.deadline = self.deadline

    def _settle_end(self) -> None:
        """This job's end as the scheduler has it, once it can say (``OwnEnd``)."""
        if self.own_end.settle():
            self._end_at(self.own_end.end)

    def _persist(self, what: str, call: Callable[[], T]) -> T:
        """Repeat a scheduler request through an outage, until the job's own end."""
        return self.executor.retry(what, call, self.hard_end)

    def _log_start(self, status: ChainStatus) -> None:
        s = self.settings
        self.chain.log(
            f"submitter {self.job_id} cycle {status.submitter_cycle} start on {self.backend.name}: "
            f"MAX_ITER={s.max_iter} CKPT_PATH={s.ckpt_path} APP_CMD={s.app_cmd!r} "
            f"RUNNER_TIME_LIMIT={s.runner_time} RUNNER_MARGIN_SEC={s.runner_margin} "
            f"SUBMITTER_TIME_LIMIT={s.submitter_time} SUBMITTER_MARGIN_SEC={s.submitter_margin} "
            f"LAUNCH_MODE={s.launch_mode.value} MODULE_LIST={s.modules!r} retries={s.retries}"
        )

    # --- the loop ----------------------------------------------------------------
    def _loop(self, status: ChainStatus) -> int:
        while True:
            self.term.check()
            self._settle_end()
            if self.chain.cancel_requested():
                return self._finish_cancelled(status)
            if status.runner_live:
                outcome = self._wait(status)
                decision = decide(
                    outcome,
                    Policy(self.settings.max_iter, self.settings.retries),
                    Tally(status.no_progress, status.retries_used),
                )
                self._judge(status, outcome, decision)
                if decision.verdict is Verdict.STOP:
                    return self.stop_chain(status, decision.state, decision.reason, decision.kind)
                continue
            try:
                counter = read_chain_counter(self.settings, self.workdir)
            except CheckpointError as exc:
                return self.stop_chain(status, ChainState.STOPPED, str(exc), ReasonKind.BAD_CHECKPOINT)
            self.executor.apply(status, CounterRead(counter))
            step = next_step(counter, self.settings.max_iter)
            if step is Step.FINISH:
                self._drop_next(status)
                if self.clock() >= self.deadline:
                    raise HandOver()  # the hooks get a successor's whole time, not this one's last seconds
                return self._complete(status)
            if status.next_job_id:
                self._promote_next(status, counter)
                continue
            if self.clock() >= self.deadline:
                raise HandOver()
            self._submit_runner(status, counter)

    def _submit_runner(self, status: ChainStatus, counter: int) -> None:
        self.watch.left_queue()

        def submit(name: str) -> str:
            once = resubmission(
                self.backend, name, lambda: submit_runner_job(self.chain, self.backend, status, name, self.workdir)
            )
            return self._persist(f"submitting runner {status.runner_seq}", once)

        submit_runner(self.executor, status, counter, self.settings.max_iter, self.clock(), submit)
        self.watch.fresh_job = status.runner_job_id  # pending, as sbatch just said: nothing to ask yet

    # --- lookahead ------------------------------------------------------------------------
    def _promote_next(self, status: ChainStatus, counter: int) -> None:
        """The pre-queued runner becomes the current one (no new sbatch)."""
        job_id = status.next_job_id
        self.executor.apply(status, SuccessorTaken())
        record = self.chain.runner_record(job_id)
        if record is not None and record.superseded:
            # it waited longer than its patience and left: submit afresh
            self.chain.log(f"lookahead: pre-queued job {job_id} gave up waiting; submitting a new runner")
            self._submit_runner(status, counter)
            return
        submit_runner(self.executor, status, counter, self.settings.max_iter, self.clock(), lambda _name: job_id)

    def _drop_next(self, status: ChainStatus) -> None:
        drop_next(self.executor, status)

    # --- waiting for the runner ------------------------------------------------------
    def _wait(self, status: ChainStatus) -> Outcome:
        if not status.runner_job_id:  # a crash between recording the intent and sbatch
            found = self.backend.find_by_name(runner_job_name(status.chain_id, status.runner_seq))
            if not found:
                self.chain.log(f"runner {status.runner_seq} was never submitted; submitting it now")
                self.executor.apply(status, RunnerLost())
                self._submit_runner(status, read_chain_counter(self.settings, self.workdir))
                return self._wait(status)
            self.executor.apply(status, RunnerFound(found[-1]))
        return self.watch.outcome_of(status)

    def _prequeue(self, status: ChainStatus) -> None:
        if self.settings.lookahead and not status.next_job_id:
            prequeue_next(self.executor, status, self.workdir)

    def _judge(self, status: ChainStatus, outcome: Outcome, decision: Decision) -> None:
        record_judgment(self.executor, self.settings, status, outcome, decision)

    # --- endings ----------------------------------------------------------------------
    def _complete(self, status: ChainStatus) -> int:
        """The hooks run within this job's time: one still running at its end
        is stopped and recorded as timed out (never cut by Slurm's kill with
        the chain left running, never run again by a successor)."""
        complete_chain(
            self.executor,
            status,
            self.settings,
            self.workdir,
            self.clock(),
            hook_timeout=max(5.0, self.hard_end - self.clock() - 5.0),
        )
        return SubmitterExit.DONE

    def stop_chain(self, status: ChainStatus, state: ChainState, reason: str, kind: ReasonKind) -> int:
        """End the chain with ``state`` and ``reason`` (of ``kind``, where one
        names it: ``effects.ending``). Returns the submitter job's exit code."""
        end_chain(
            self.executor,
            status,
            self.settings,
            self.workdir,
            state,
            reason,
            kind=kind,
            hook_timeout=max(5.0, min(self.hard_end - self.clock() - 5.0, 3600.0)),
        )
        return SubmitterExit.DONE if state is ChainState.CANCELLED else SubmitterExit.CHAIN_ENDED

    def _finish_cancelled(self, status: ChainStatus) -> int:
        if status.runner_live and status.runner_job_id:
            self.backend.cancel(status.runner_job_id)
        return self.stop_chain(status, ChainState.CANCELLED, "cancelled by chain cancel", ReasonKind.CANCELLED)

    def _restart(self, status: ChainStatus, handover: HandOver) -> None:
        """Queue the successor submitter: behind this job (never two at once)
        and, stepping aside, behind its pending runner's start too (Slurm's
        ``after:``, also satisfied by a cancel), so meanwhile the chain holds
        no slot at all."""
        self.watch.left_queue()  # the successor may queue the next runner at once
        self.executor.apply(status, HandingOver())
        name = submitter_job_name(status.chain_id, status.submitter_cycle)
        aside = handover.runner_job_id if isinstance(handover, StepAsideNow) else ""
        # preempted: not behind this job, which Slurm may requeue and hold (~2 min); a
        # requeued copy leaves at its start (an older cycle), this one leaves now
        dependency = (
            "" if isinstance(handover, Preempted) else f"afterany:{self.job_id}" + (f",after:{aside}" if aside else "")
        )

        submit = resubmission(
            self.backend,
            name,
            lambda: self.backend.submit(
                self.chain.script(SUBMITTER_SCRIPT), job_name=name, dependency=dependency or None, cwd=self.workdir
            ),
        )
        new_id = self._persist("submitting the next submitter", submit)
        self.executor.apply(status, SubmitterQueued(new_id))
        if isinstance(handover, Preempted):
            self.chain.log(
                f"submitter {self.job_id} preempted: successor {new_id} (cycle {status.submitter_cycle}) takes over"
            )
            return
        if aside:
            self.chain.log(
                f"submitter {self.job_id} steps aside: runner job {aside} still waits for resources "
                f"after {self.settings.step_aside_after}s; successor {new_id} (cycle "
                f"{status.submitter_cycle}) starts when it does"
            )
            return
        live = f"; it adopts runner job {status.runner_job_id}" if status.runner_live else ""
        self.chain.log(
            f"submitter {self.job_id} near its margin: submitted successor {new_id} "
            f"(cycle {status.submitter_cycle}){live}"
        )
