"""What both modes' drivers share: the first runner queued with the chain,
and the wait for (or refusal of) a submitter still alive at a resume."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from chain.backends.base import Backend, JobInfo, JobState
from chain.core.names import submitter_job_name
from chain.core.settings import Settings
from chain.effects.executor import Executor
from chain.effects.runners import prequeue_next, submit_runner, submit_runner_job
from chain.errors import ChainDirError, CheckpointError
from chain.store import ChainStatus
from chain.store.counter import read_chain_counter


def presubmit_first_runner(
    run: Executor, status: ChainStatus, settings: Settings, workdir: Path, *, prequeue: bool = False
) -> None:
    """Submit the first runner together with the submitter, which adopts it:
    one scheduling pass less before the app starts (with lookahead, the
    second runner too, queued behind the first). Skipped when there is
    nothing to run (a resumed chain at MAX_ITER: the submitter completes it)
    or the counter is unreadable (refused before, unless it changed since:
    the submitter then stops the chain with the reason)."""
    if status.runner_live:
        return  # a resumed chain whose runner is still to be judged
    try:
        counter = read_chain_counter(settings, workdir)
    except CheckpointError:
        return
    if counter >= settings.max_iter:
        return
    submit_runner(
        run,
        status,
        counter,
        settings.max_iter,
        time.time(),
        lambda name: submit_runner_job(run.chain, run.backend, status, name, workdir),
        echo=False,
    )
    if settings.lookahead or prequeue:
        # runner 2 queued now, not when the submitter job gets to it: on a
        # busy cluster the submitter may start after runner 1 has ended
        prequeue_next(run, status, workdir, echo=False)


FINISHING_WAIT = 120.0  # seconds resume waits for an ended chain's submitter to finish its report hook


def refuse_live_submitter(
    backend: Backend,
    status: ChainStatus,
    *,
    wait: float = 0.0,
    notify: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Refuse to resume while a submitter of this chain is live.

    A chain that has ended (stopped, failed) may still have its submitter
    writing the report: then wait up to ``wait`` seconds for it to exit
    rather than send the user away for a few seconds.
    """
    cycles = submitters_by_cycle(backend, status)
    ids = sorted(cycles)
    # a queued submitter of an earlier cycle is a copy Slurm requeued after it handed over
    # (preemption, a failed node): it leaves at its start and never drives the chain again
    earlier = {i for i, cycle in cycles.items() if cycle < status.submitter_cycle}
    deadline = clock() + wait
    told = False
    while True:
        infos = backend.query(ids)
        live = [
            i
            for i, info in infos.items()
            if info.state.active and not (i in earlier and info.state is JobState.PENDING)
        ]
        if not live:
            return
        why = _why_not_resume(status, live, infos, wait, late=clock() >= deadline)
        if why:
            raise ChainDirError(why)
        if notify and not told:
            notify(f"waiting for submitter job {live[0]} to finish the {status.state.value} chain's report")
            told = True
        sleep(min(2.0, max(0.0, deadline - clock())))


def _why_not_resume(
    status: ChainStatus, live: list[str], infos: Mapping[str, JobInfo], wait: float, *, late: bool
) -> str:
    """Why a live submitter refuses the resume now; "" when it is an ended
    chain's submitter finishing its report, worth waiting for."""
    if not status.state.ended:
        return f"chain {status.chain_id} still has an active submitter (job {live[0]}); nothing to resume"
    pending = [i for i in live if infos[i].state is JobState.PENDING]
    if pending:  # a successor submitter still queued: nothing will finish by itself
        return (
            f"chain {status.chain_id} is {status.state.value} but its submitter job "
            f"{pending[0]} is still queued: scancel it, then resume"
        )
    if late:
        return (
            f"chain {status.chain_id} is {status.state.value} but its submitter (job {live[0]}) "
            f"is still finishing its report after {wait:.0f}s; resume when it has ended"
        )
    return ""


def known_submitters(backend: Backend, status: ChainStatus) -> list[str]:
    """The chain's submitter jobs the scheduler may still run: the recorded
    one, and any of the neighbouring cycles found by their unique names (a
    successor submitted just before its predecessor died)."""
    return sorted(submitters_by_cycle(backend, status))


def submitters_by_cycle(backend: Backend, status: ChainStatus) -> dict[str, int]:
    """``known_submitters`` with each one's cycle (the recorded one: the current cycle)."""
    ids = {status.submitter_job_id: status.submitter_cycle} if status.submitter_job_id else {}
    for cycle in range(max(0, status.submitter_cycle - 1), status.submitter_cycle + 2):
        ids.update(dict.fromkeys(backend.find_by_name(submitter_job_name(status.chain_id, cycle)), cycle))
    return ids
