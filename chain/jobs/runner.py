"""The runner: runs the app inside the runner job, stops it before the wall
time so it can checkpoint, and records the outcome for the submitter.

``run`` checks that this job is the chain's current runner (a requeued copy
or a stale pre-queued one leaves without running the app), reads the counter,
plans the stop signal (``core.runner_rules``), then runs the app
(``jobs.app_run``: started, supervised, its end recorded). The exit contract
is in ``core.runner_rules``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from chain.backends.base import Backend, scheduled_end
from chain.core.clock import steady_clock
from chain.core.hostlist import expand_hostlist
from chain.core.names import runner_seq
from chain.core.protocol import is_current_runner
from chain.core.records import RunnerRecord
from chain.core.runner_rules import (
    plan_schedule,
    promotion_give_up,
)
from chain.core.settings import Settings
from chain.errors import ChainError, CheckpointError
from chain.jobs.app_run import end_record, run_app, say
from chain.jobs.relay import Relay, Turn
from chain.jobs.supervise import Due
from chain.modes import Look, RunnerJob, driver
from chain.primitives.codes import RunnerExit
from chain.store import ChainDir, ChainStatus
from chain.store.counter import read_chain_counter

PROMOTION_PATIENCE = 120.0  # seconds a pre-queued runner waits to become the current one


def wait_for_promotion(
    chain: ChainDir,
    job_id: str,
    seq: int | None,
    *,
    clock: Callable[[], float],
    give_up_at: Callable[[ChainStatus], float],
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[ChainStatus | None, bool]:
    """A runner pre-queued by lookahead starts as soon as its predecessor
    ends, before the submitter has judged it: wait until the submitter makes
    it the current runner, or drops it (chain ended, or not continued), or
    until ``give_up_at`` (``core.runner_rules.promotion_give_up``). Returns
    the last status and whether it gave up."""
    give_up: float | None = None
    while True:
        status = chain.load_status()
        if status is None or status.state.ended or not status.queued_next(job_id, seq):
            return status, False
        if give_up is None:  # asked only by a runner that has to wait (it may cost a scheduler call)
            give_up = give_up_at(status)
        if clock() >= give_up:
            return status, True
        sleep(0.1)


def run(
    chain: ChainDir,
    settings: Settings,
    backend: Backend,
    *,
    job_id: str,
    job_name: str,
    workdir: Path,
    preflight_error: str | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    look: Look | None = None,
) -> int:
    """Run the app once; returns the runner's exit code (``core.runner_rules``).
    ``clock``: wall-clock seconds that do not jump (``core.clock``) by default;
    ``look``: the mode's accounting look, started already (``ModeDriver.runner_look``)."""
    clock = clock or steady_clock()
    record = RunnerRecord(
        job_id,
        job_name,
        seq=runner_seq(job_name),
        start=clock(),
        host=os.uname().nodename,
        nodes=_job_nodes(os.environ),
    )
    job = RunnerJob(chain, settings, backend, record, workdir, preflight_error, clock, sleep, look)
    previous = chain.runner_record(job_id)
    if previous is not None and previous.ended:
        # Slurm requeued this job (node failure) after it had already run and
        # recorded its outcome: the submitter judges that record and may have
        # started the next runner, so this copy must not run the app again.
        say(record, "this job already ran (requeued after recording its end); exiting without running the app")
        driver(settings.mode).rerun_after_end(job)
        return 0
    return driver(settings.mode).run_runner(job)


def run_promoted(job: RunnerJob) -> int:
    """Submitter mode: run the app once the submitter has made this job the
    chain's current runner (at once, unless lookahead queued it ahead)."""
    status = _await_promotion(job)
    if status is None:
        return 0
    return _run_current(job, status, slurm_end=_slurm_end(job.backend, job.record.job_id))


def _await_promotion(job: RunnerJob) -> ChainStatus | None:
    """The chain's status once this job is its current runner; None (its end
    recorded as superseded: no app ran) when it is not, or gave up waiting."""
    chain, settings, record, clock, sleep = job.chain, job.settings, job.record, job.clock, job.sleep
    job_id = record.job_id

    def give_up_at(status: ChainStatus) -> float:
        end = _job_end(job, _slurm_end(job.backend, job_id))
        return promotion_give_up(clock(), PROMOTION_PATIENCE, end, settings.stop_margin(status.margin))

    status, gave_up = wait_for_promotion(chain, job_id, record.seq, clock=clock, sleep=sleep, give_up_at=give_up_at)
    if status is not None and is_current_runner(status, job_id, record.seq):
        return status
    # the submitter submits afresh when it finds this record (submitter._promote_next),
    # or, had it promoted this job meanwhile, judges it a runner that ran no app
    # (core.decision): never a timeout, so no margin is learned from it
    now = clock()
    why = (
        (
            f"not promoted: gave up waiting after {now - (record.start or now):.0f} s "
            "(its patience, or its own end less its margin)"
        )
        if gave_up
        else "superseded: not the chain's current runner"
    )
    end_record(chain, record, 0, now, why, superseded=True)
    say(record, f"{why}; exiting without running the app")
    return None


def run_relay(job: RunnerJob) -> int:
    """Relay mode (``jobs.relay``): judge the predecessor and take over, or end
    the chain here; after the app, end the chain if this runner's own outcome
    ends it."""
    chain, record, clock, job_id = job.chain, job.record, job.clock, job.record.job_id
    look = job.look or driver(job.settings.mode).runner_look(chain, job.backend, job_id, record.seq)
    known = look() if look is not None else None  # this job and its predecessor, one look
    # asked once (accounting just did not show it: the scheduler): the relay and the app's schedule share it
    slurm_end = scheduled_end(known, job_id)
    if slurm_end is None:
        slurm_end = _slurm_end(job.backend, job_id, scheduler_only=True)
    relay = Relay(
        chain,
        job.settings,
        job.backend,
        job.workdir,
        job_id,
        record.seq,
        clock,
        job.sleep,
        job_end=_job_end(job, slurm_end),
        limit_end=job.limit_end(),
        known=known,
    )
    take = relay.take_over()
    if take.step is not Turn.RUN or take.status is None:
        why = take.why or "the chain ends here"
        end_record(chain, record, 0, clock(), f"relay: {why}", superseded=True)
        say(record, f"not running the app: {why}")
        relay.finish(take)
        return 0
    if slurm_end is None:  # not answered at the start (an outage the take-over may have ridden out): again
        slurm_end = _slurm_end(job.backend, job_id)
    try:
        code = _run_current(job, take.status, slurm_end=slurm_end, due=functools.partial(relay.due_beside_app, take))
        relay.finish(relay.after_app(chain.runner_record(job_id) or record))
    except BaseException:
        if take.deferred_until is not None:  # a fault or an interrupt: the chain is not left with nothing queued
            relay.queue_deferred()
        raise
    return code


def _run_current(
    job: RunnerJob,
    status: ChainStatus,
    *,
    slurm_end: float | None,
    due: Callable[[float], Due | None] | None = None,
) -> int:
    """The chain's current runner: read the counter, run the app, record the
    end. ``slurm_end``: this job's end as the scheduler gave it (None: it
    could not say; the configured limit bounds the schedule); ``due``: the
    supervision's (``jobs.supervise.supervise``), given the stop time."""
    chain, settings, record, clock = job.chain, job.settings, job.record, job.clock
    try:
        record.iter_before = read_chain_counter(settings, job.workdir)
    except CheckpointError as exc:
        return end_record(chain, record, RunnerExit.BAD_CHECKPOINT, clock(), str(exc))
    if job.preflight_error:
        record.iter_after = record.iter_before
        return end_record(chain, record, RunnerExit.PREFLIGHT, clock(), job.preflight_error)
    refused = _verify(chain, settings, record, job.workdir)
    if refused:  # a checkpoint failed verification and none to fall back to, or one could not be set aside
        record.iter_after = record.iter_before
        return end_record(chain, record, RunnerExit.BAD_CHECKPOINT, clock(), refused)
    plan = plan_schedule(clock(), settings.runner_seconds, settings.stop_margin(status.margin), slurm_end)
    beside = due(plan.stop_at) if due is not None else None
    return run_app(chain, settings, job.backend, record, plan, status, job.workdir, clock, job.sleep, due=beside)


def _verify(chain: ChainDir, settings: Settings, record: RunnerRecord, workdir: Path) -> str:
    """``jobs.verify.verify_before_app``, loaded only where there is something to verify."""
    if not settings.verifies:
        return ""
    from chain.jobs.verify import verify_before_app

    return verify_before_app(chain, settings, record, workdir, lambda line: say(record, line))


def _job_end(job: RunnerJob, slurm_end: float | None) -> float:
    """This job's end: the scheduler's (``_slurm_end``), else its configured
    limit from its start (``RunnerJob.limit_end``)."""
    return slurm_end or job.limit_end()


def _slurm_end(backend: Backend, job_id: str, *, scheduler_only: bool = False) -> float | None:
    """This job's end as the scheduler has it (``scheduler_only``: asked of
    the scheduler itself, accounting having just been asked); None when it
    cannot say (the configured limit bounds the schedule then)."""
    try:
        return backend.scheduler_end(job_id) if scheduler_only else backend.end_time(job_id)
    except ChainError:
        return None


def _job_nodes(environ: Mapping[str, str]) -> list[str]:
    """This job's nodes as Slurm names them (SLURM_JOB_NODELIST); none
    outside Slurm, or when the list cannot be read."""
    try:
        return expand_hostlist(environ.get("SLURM_JOB_NODELIST", ""))
    except ValueError:
        return []
