"""Runners in the chain's state: submitting the next one (the submitter,
a relay runner taking over, ``chain submit``), and the one queued behind the
current one (lookahead's pre-queued runner, relay's successor): queueing it
so its queue wait overlaps the compute, dropping it when the chain does not
go on. Every change goes through the protocol (``core.protocol``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from chain.backends.base import Backend
from chain.core.events import RunnerIntended, RunnerSubmitted, SuccessorDropped, SuccessorQueued
from chain.core.names import RUNNER_SCRIPT, runner_job_name
from chain.effects.executor import Executor
from chain.errors import SchedulerError
from chain.store import ChainDir, ChainStatus


def submit_runner(
    run: Executor,
    status: ChainStatus,
    counter: int,
    max_iter: int,
    now: float,
    submit: Callable[[str], str],
    *,
    echo: bool = True,
) -> str:
    """Submit the chain's next runner with ``submit(job_name)``.

    The intention is saved first: a crash between here and sbatch is
    resolved on restart by looking the runner up by its unique name; and
    the runner, once started, checks that it is the chain's current one.
    """
    run.apply(status, RunnerIntended(counter, now))
    job_id = submit(runner_job_name(status.chain_id, status.runner_seq))
    run.apply(status, RunnerSubmitted(job_id, max_iter, echo))
    return job_id


def submit_runner_job(
    chain: ChainDir, backend: Backend, status: ChainStatus, name: str, workdir: Path, *, dependency: str | None = None
) -> str:
    """One sbatch of the runner script as ``name``: every runner submission
    of the chain goes through here, so none lands on a node the chain
    excluded (``core.exclusion``)."""
    script = chain.script(RUNNER_SCRIPT)
    return backend.submit(script, job_name=name, dependency=dependency, cwd=workdir, exclude=status.excluded_nodes)


def prequeue_next(run: Executor, status: ChainStatus, workdir: Path, *, echo: bool = True) -> None:
    """Queue the next runner behind the current one (``afterany``) so its
    queue wait overlaps the compute: lookahead's (it waits to be promoted,
    ``jobs.runner``) and relay's runner 2 at ``chain submit``. A failure only
    costs the overlap: the runner is queued afresh when it is due (by the
    submitter; in relay mode by the current runner). Both modes call it, so
    its log lines name neither. ``run``: the executor of the job or command."""
    chain = run.chain
    name = runner_job_name(status.chain_id, status.runner_seq + 1)
    try:
        job_id = submit_runner_job(
            chain, run.backend, status, name, workdir, dependency=f"afterany:{status.runner_job_id}"
        )
    except SchedulerError as exc:
        chain.log(f"next runner: could not queue runner {status.runner_seq + 1}: {exc}", echo=echo)
        return
    run.apply(
        status,
        SuccessorQueued(
            job_id,
            f"next runner: runner {status.runner_seq + 1} queued as job {job_id} behind job {status.runner_job_id}",
            echo,
        ),
    )


def drop_next(run: Executor, status: ChainStatus, *, echo: bool = True) -> None:
    """The chain does not go on from here: cancel the runner queued behind
    the current one and forget it (a failed cancel is logged, not raised, by
    ``run``, the job's or command's executor, with its backend)."""
    run.apply(status, SuccessorDropped(echo))
