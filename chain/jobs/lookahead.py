"""Lookahead: runner k+1 queued behind runner k (``--dependency=afterany``)
so its queue wait overlaps k's compute. It waits to be promoted by the
submitter (``jobs.runner.wait_for_promotion``) and is cancelled whenever the
chain does not go on from k. Relay mode queues its runner 2 and drops a
queued successor through the same two functions."""

from __future__ import annotations

from pathlib import Path

from chain.backends.base import Backend
from chain.core.names import RUNNER_SCRIPT, runner_job_name
from chain.errors import SchedulerError
from chain.store import ChainDir, ChainStatus


def prequeue_next(chain: ChainDir, backend: Backend, status: ChainStatus, workdir: Path, *,
                  echo: bool = True) -> None:
    """Queue the next runner behind the current one (``afterany``) so its
    queue wait overlaps the compute: lookahead's (it waits to be promoted,
    runner.py) and relay's runner 2 at ``chain submit``. A failure only
    costs the overlap: the runner is queued afresh when it is due (by the
    submitter; in relay mode by the current runner). Both modes call it, so
    its log lines name neither."""
    name = runner_job_name(status.chain_id, status.runner_seq + 1)
    try:
        job_id = backend.submit(chain.scripts / RUNNER_SCRIPT, job_name=name,
                                dependency=f"afterany:{status.runner_job_id}", cwd=workdir)
    except SchedulerError as exc:
        chain.log(f"next runner: could not queue runner {status.runner_seq + 1}: {exc}", echo=echo)
        return
    status.next_job_id = job_id
    chain.save_status(status)
    chain.log(f"next runner: runner {status.runner_seq + 1} queued as job {job_id} "
              f"behind job {status.runner_job_id}", echo=echo)


def drop_next(chain: ChainDir, backend: Backend, status: ChainStatus, *, echo: bool = True) -> None:
    """The chain does not go on from here: cancel the runner queued behind
    the current one (lookahead's pre-queued runner, relay's successor) and
    forget it (it would exit at once anyway, finding itself not the chain's
    current runner). A failed cancel is logged, not raised. Both modes call
    it, so its log lines name neither."""
    if not status.next_job_id:
        return
    job_id, status.next_job_id = status.next_job_id, ""
    chain.save_status(status)
    try:
        backend.cancel(job_id)
        chain.log(f"next runner: cancelled the queued runner job {job_id}", echo=echo)
    except SchedulerError as exc:
        chain.log(f"next runner: cancel of the queued runner job {job_id} failed: {exc}", echo=echo)
