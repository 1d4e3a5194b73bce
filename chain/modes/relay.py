"""Relay mode: no submitter job. Each runner judges its predecessor, takes
over, queues its successor (``afterany`` on itself; later, if needed at
all, when its predecessor's pace shows it completing the chain) and, when
its own outcome ends the chain, ends it (``chain.jobs.relay``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from chain.backends.base import Backend, JobInfo, JobState
from chain.core.decision import cancelled_outside
from chain.core.events import RelayStarted, SuccessorQueued
from chain.core.names import runner_job_name
from chain.core.settings import Mode, Settings
from chain.effects.executor import Executor
from chain.effects.runners import submit_runner_job
from chain.errors import ChainDirError, ChainError
from chain.modes.base import Look, ModeDriver, RunnerJob
from chain.modes.common import FINISHING_WAIT, presubmit_first_runner, refuse_live_submitter
from chain.store import ChainDir, ChainStatus

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobNeeds


class RelayMode(ModeDriver):
    mode = Mode.RELAY
    has_submitter = False

    def needs(self, lookahead: bool) -> JobNeeds:
        from chain.core.limits import JobNeeds

        # the running runner and its queued successor: relay always queues one ahead
        return JobNeeds(self.mode, 2, "a runner and its successor", 1, lookahead)

    def start(self, run: Executor, status: ChainStatus, settings: Settings, workdir: Path) -> str:
        """A new chain queues runner 1 and runner 2 behind it; a resumed chain
        whose last runner was never judged queues the runner that judges it first."""
        run.apply(status, RelayStarted())
        if not status.runner_live:
            presubmit_first_runner(run, status, settings, workdir, prequeue=True)
            if status.runner_job_id and status.runner_live:
                return status.runner_job_id
        # a runner to judge first, or nothing to run (counter at MAX_ITER, or
        # unreadable): one runner judges, then goes on or ends the chain (its id
        # joins worker_ids.txt if it takes over)
        name = runner_job_name(status.chain_id, status.runner_seq + 1)
        job_id = submit_runner_job(run.chain, run.backend, status, name, workdir)
        run.apply(status, SuccessorQueued(job_id))
        return job_id

    def refuse_resume(self, backend: Backend, status: ChainStatus, notify: Callable[[str], None] | None) -> None:
        """Not while one of its runners is running or queued (nor a submitter
        of the chain's earlier cycles in submitter mode)."""
        ids = [i for i in (status.runner_job_id, status.next_job_id) if i]
        live = [i for i, info in backend.query(ids).items() if info.state.active] if ids else []
        if live:
            raise ChainDirError(
                f"chain {status.chain_id} still has a runner job {live[0]} running or queued; nothing to resume"
            )
        refuse_live_submitter(backend, status, wait=FINISHING_WAIT, notify=notify)

    def runner_look(self, chain: ChainDir, backend: Backend, job_id: str, seq: int | None) -> Look:
        """One look at accounting (no slurmctld RPC) for what a relay runner
        asks before its app: its own start and limit (its end) and the
        predecessor it is about to judge, which it would otherwise ask in a
        second look. The predecessor is named by state.json read without the
        chain's lock: only its id is taken, and its line is used only where
        the take-over judges that very job (``jobs.relay.Relay.known``)."""
        ids = [job_id]
        try:
            status = chain.load_status()
        except ChainError:
            status = None  # the take-over reads it again, and says what is wrong
        if status is not None and status.runner_live and status.queued_next(job_id, seq):
            ids.append(status.runner_job_id)
        try:
            return backend.accounted_later(ids)
        except ChainError:  # an id sacct must not be given: the take-over refuses it in its own words
            return lambda: None

    def rerun_after_end(self, job: RunnerJob) -> None:
        """Killed after recording its end and before queueing the successor
        it had deferred (a preemption's requeue), or its relay broken: a
        successor queued now, to judge it (nothing when one is queued)."""
        from chain.jobs.relay import Relay

        record, end = job.record, job.limit_end()  # the copy's own end: it gives up before
        relay = Relay(
            job.chain, job.settings, job.backend, job.workdir, record.job_id, record.seq, job.clock, job.sleep, end
        )
        relay.queue_deferred()

    def run_runner(self, job: RunnerJob) -> int:
        from chain.jobs.runner import run_relay  # the job's code, loaded in the job only

        return run_relay(job)

    def stranded(self, status: ChainStatus, jobs: Mapping[str, JobInfo], cancelling: bool) -> str:
        if cancelling or status.state.ended:
            return ""
        if why := self.cancelled_outside(status, jobs, cancelling):
            return why
        return "" if _alive(status, jobs) else "nothing of it runs or is queued"

    def cancelled_outside(self, status: ChainStatus, jobs: Mapping[str, JobInfo], cancelling: bool) -> str:
        """Its last runner or queued successor scancelled, nothing of it left
        running or queued: ``chain cancel`` closes it, ``chain submit
        --resume`` goes on (nothing while ``chain cancel``, whose own cancels
        these are, is at work)."""
        if status.state.ended or cancelling or _alive(status, jobs):
            return ""
        # the queued one named first: its cancel is what left the chain with nothing
        gone = [i for i in reversed(status.runner_jobs()) if i in jobs and jobs[i].state is JobState.CANCELLED]
        return cancelled_outside(gone[0]) if gone else ""

    def no_submitter_log(self, status: ChainStatus) -> str:
        return (
            f"chain {status.chain_id} runs in relay mode: it has no submitter job "
            "(the runners' output says what each judged: chain logs --runner N)"
        )


def _alive(status: ChainStatus, jobs: Mapping[str, JobInfo]) -> bool:
    return any(jobs[i].state.active for i in status.runner_jobs() if i in jobs)
