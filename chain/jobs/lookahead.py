"""Lookahead: runner k+1 queued behind runner k (``--dependency=afterany``)
so its queue wait overlaps k's compute. It waits to be promoted by the
submitter (``jobs.runner.wait_for_promotion``) and is cancelled whenever the
chain does not go on from k."""

from __future__ import annotations

from pathlib import Path

from chain.backends.base import Backend
from chain.core.names import RUNNER_SCRIPT, runner_job_name
from chain.errors import SchedulerError
from chain.store import ChainDir, ChainStatus


def prequeue_next(chain: ChainDir, backend: Backend, status: ChainStatus, workdir: Path, *,
                  echo: bool = True) -> None:
    """Lookahead: queue the next runner behind the current one (``afterany``)
    so its queue wait overlaps the compute; it waits to be promoted
    (runner.py). A failure only costs the overlap: the submitter submits the
    runner afresh when it is due."""
    name = runner_job_name(status.chain_id, status.runner_seq + 1)
    try:
        job_id = backend.submit(chain.scripts / RUNNER_SCRIPT, job_name=name,
                                dependency=f"afterany:{status.runner_job_id}", cwd=workdir)
    except SchedulerError as exc:
        chain.log(f"lookahead: could not pre-queue runner {status.runner_seq + 1}: {exc}", echo=echo)
        return
    status.next_job_id = job_id
    chain.save_status(status)
    chain.log(f"lookahead: runner {status.runner_seq + 1} queued as job {job_id} "
              f"behind job {status.runner_job_id}", echo=echo)


def drop_next(chain: ChainDir, backend: Backend, status: ChainStatus, *, echo: bool = True) -> None:
    """The chain does not go on from here: cancel the pre-queued runner and
    forget it (it would exit at once anyway, finding itself not promoted).
    A failed cancel is logged, not raised."""
    if not status.next_job_id:
        return
    job_id, status.next_job_id = status.next_job_id, ""
    chain.save_status(status)
    try:
        backend.cancel(job_id)
        chain.log(f"lookahead: cancelled the pre-queued runner job {job_id}", echo=echo)
    except SchedulerError as exc:
        chain.log(f"lookahead: cancel of job {job_id} failed: {exc}", echo=echo)
