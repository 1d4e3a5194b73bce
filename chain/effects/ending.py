"""Judging an ended runner and ending the chain: what the submitter and a
relay runner (``jobs.relay``) share, so both modes decide and end alike."""

from __future__ import annotations

import time
from pathlib import Path

from chain.backends.base import JobState
from chain.core.decision import Decision, Outcome, Verdict, overshoot
from chain.core.events import CancelledUnjudged, CounterRead, Ended, Ending, Judged
from chain.core.exclusion import blamed
from chain.core.margin import MarginState, measured_stop, next_margin, startup_seconds
from chain.core.model import ChainState
from chain.core.reasons import ReasonKind
from chain.core.records import RunnerRecord
from chain.core.settings import Settings
from chain.effects.executor import Executor
from chain.effects.notify import announce_end
from chain.store import ChainDir, ChainStatus, judged_runner
from chain.store.counter import known_counter

MARGIN_WARNING = "margin does not fit"  # the reason chain status shows while the app's stop does not fit
HOOK_TIMEOUT = 3600.0  # seconds a hook may run when the job's own end does not bound it


def record_judgment(
    run: Executor, settings: Settings, status: ChainStatus, outcome: Outcome, decision: Decision
) -> None:
    """Write the current runner's judgment (runners.jsonl, chain.log) and the
    counters the decision keeps; learn the margin from its stop; put a
    node-ish failure on its node (``core.exclusion``, with the nodes the
    outcome found down). ``run``: the job's executor."""
    chain = run.chain
    job_id = status.runner_job_id
    record = chain.runner_record(job_id)
    chain.judge_runner(
        judged_runner(
            status,
            record,
            state=outcome.slurm_state,
            exit_code=outcome.exit_code,
            iter_before=outcome.iter_before,
            iter_after=outcome.iter_after,
            verdict=decision.verdict,
            reason=decision.reason,
            kind=decision.kind,
            recorded=outcome.recorded,
        )
    )
    chain.log(f"runner {status.runner_seq} (job {job_id}): {decision.verdict.value}: {decision.reason}")
    margin, reason = (
        _adapt_margin(chain, settings, status, record, outcome) if settings.adaptive_margin else (None, None)
    )
    nodes = record.nodes if record else []
    blame = blamed(nodes, outcome.nodes_down, failed=outcome.failed_on_node, taken_back=outcome.taken_back)
    run.apply(
        status,
        Judged(
            outcome.iter_after,
            decision.progress.no_progress,
            decision.progress.retries_used,
            margin,
            reason,
            tuple(blame),
            settings.exclude_after,
            ReasonKind.MARGIN_WARNING if reason else None,
            job_id=job_id,
        ),
    )


def _adapt_margin(
    chain: ChainDir, settings: Settings, status: ChainStatus, record: RunnerRecord | None, outcome: Outcome
) -> tuple[tuple[int, float, float] | None, str | None]:
    """Learn the app's checkpoint time from the runner's stop (``core.margin``):
    the margin state and the reason to keep (None: unchanged). The margin
    travels in the chain's state, so both modes keep it."""
    if record is not None and record.superseded:
        return None, None  # it ran no app (a pre-queued runner that left): nothing to learn, even if killed after
    r = record or RunnerRecord(status.runner_job_id)
    stop = measured_stop(
        stop_sent=r.stop_sent,
        kill_at=r.kill_at,
        stop_to_exit=r.stop_to_exit,
        external_signal=r.external_signal,
        killed=r.killed,
        timed_out=outcome.slurm_state is JobState.TIMEOUT,
        saved_at=r.saved_at,
        advanced=outcome.advanced,
    )
    before = MarginState(max(status.margin, settings.runner_margin), status.worst_stop_to_exit, status.worst_startup)
    step = next_margin(
        before,
        floor=settings.runner_margin,
        runner_seconds=settings.runner_seconds,
        stop=stop,
        startup=startup_seconds(r.start, r.app_start),
    )
    if step.state.margin != before.margin:
        chain.log(f"runner margin {before.margin}s -> {step.state.margin}s ({step.why})")
    reason: str | None = None
    if step.warning:  # at every runner, and in `chain status` (its reason) while the chain runs
        reason = f"{MARGIN_WARNING}: {step.warning}"
        chain.log(f"runner {status.runner_seq}: {reason}")
    elif status.reason_kind is ReasonKind.MARGIN_WARNING:  # the last runners fit again
        reason = ""
    return (step.state.margin, step.state.worst_stop_to_exit, step.state.worst_startup), reason


def complete_chain(
    run: Executor,
    status: ChainStatus,
    settings: Settings,
    workdir: Path,
    now: float,
    *,
    hook_timeout: float = HOOK_TIMEOUT,
    job_report: bool = False,
) -> None:
    """The counter reached MAX_ITER: run the hooks, announce the end
    (``effects.notify``), then mark the chain completed. ``run``: the
    executor of the job that completes it; ``job_report``: a relay runner's
    short report (``effects.hooks.plan_hooks``)."""
    chain = run.chain
    started = time.monotonic()
    chain.log(f"counter {status.iteration} reached MAX_ITER={settings.max_iter}; running hooks")
    reason = f"reached MAX_ITER={settings.max_iter}{overshoot(status.iteration, settings.max_iter)}"
    # the state turns completed after the hooks and the announcement (a
    # watcher's --wait ends with the report made and the notify commands run);
    # both are told the final state and reason
    from chain.effects.hooks import run_hooks  # the job that ends the chain's only

    run_hooks(
        chain,
        status,
        settings,
        workdir,
        record=run.recorder(status),
        timeout=hook_timeout,
        final=(ChainState.COMPLETED, reason),
        job_report=job_report,
    )
    announce_end(run, status, settings, workdir, final=(ChainState.COMPLETED, reason))
    completed_at = now + (time.monotonic() - started)
    run.apply(status, Ended(ChainState.COMPLETED, reason, completed_at=completed_at, kind=ReasonKind.FINISHED))
    chain.log("chain completed")


def end_chain(
    run: Executor,
    status: ChainStatus,
    settings: Settings,
    workdir: Path,
    state: ChainState,
    reason: str,
    *,
    kind: ReasonKind | None = None,
    hook_timeout: float = HOOK_TIMEOUT,
    job_report: bool = False,
) -> None:
    """End the chain with ``state`` and ``reason`` (of ``kind``, where one names it): drop a queued runner, run
    the report hook (it helps most when a chain ended badly; the analytics
    hooks proper run only on completion), then save the state, so a watcher
    sees the end with the report made. ``run``: the executor of the job that
    ends it; ``job_report``: as ``complete_chain``'s."""
    chain = run.chain
    run.apply(status, Ending())  # a queued runner must not outlive the chain
    chain.log(f"chain {state.value}: {reason}")
    from chain.effects.hooks import run_hooks  # the job that ends the chain's only

    run_hooks(
        chain,
        status,
        settings,
        workdir,
        record=run.recorder(status),
        timeout=hook_timeout,
        only=("report",),
        final=(state, reason),
        job_report=job_report,
    )
    announce_end(run, status, settings, workdir, final=(state, reason))
    run.apply(status, Ended(state, reason, kind=kind))


def mark_cancelled(run: Executor, status: ChainStatus, reason: str, *, settings: Settings) -> None:
    """The chain is cancelled with no job of it left to say so (``chain
    cancel``, or a relay whose jobs were scancelled): judge the runner nobody
    judged, forget the queued one, record the counter as chain last knows it,
    announce the end, save; through ``run``, the command's one executor."""
    chain = run.chain
    record: RunnerRecord | None = None
    if status.runner_live and status.runner_job_id:
        record = chain.runner_record(status.runner_job_id) or RunnerRecord(status.runner_job_id)
        chain.judge_runner(
            judged_runner(
                status,
                record,
                state=JobState.CANCELLED,
                exit_code=record.exit_code,
                iter_before=status.iter_before if record.iter_before is None else record.iter_before,
                iter_after=status.iter_before if record.iter_after is None else record.iter_after,
                verdict=Verdict.STOP,
                reason=reason,
                kind=ReasonKind.CANCELLED,
                recorded=record.ended,
            )
        )
    run.apply(status, CancelledUnjudged())
    if not status.state.ended:  # nobody reads the counter between runners any more: status must not stay stale
        run.apply(status, CounterRead(_last_counter(status, settings, record)))
    final = (status.state, status.reason) if status.state.ended else (ChainState.CANCELLED, reason)
    kind = status.reason_kind if status.state.ended else ReasonKind.CANCELLED
    announce_end(run, status, settings, Path(status.workdir or chain.root), final=final)
    run.apply(status, Ended(*final, kind=kind))
    chain.log(f"chain {status.chain_id} cancelled: {reason}", echo=False)


def _last_counter(status: ChainStatus, settings: Settings, record: RunnerRecord | None) -> int:
    """The chain's counter at a cancel, as the views show it (``known_counter``,
    which runs no program): the app's checkpoint where it is read without one,
    else what the cancelled runner recorded at its end (a ``--counter-cmd``
    read once, by the runner), else what the chain recorded last."""
    recorded = record.iter_after if record is not None and record.iter_after is not None else status.iteration
    return known_counter(recorded, status.workdir, counter_cmd=settings.counter_cmd, ckpt_path=settings.ckpt_path)
