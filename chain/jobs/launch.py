"""Submitting a runner: the protocol the submitter and ``chain submit`` share."""

from __future__ import annotations

from collections.abc import Callable

from chain.core.names import runner_job_name
from chain.store import ChainDir, ChainStatus


def submit_runner(chain: ChainDir, status: ChainStatus, counter: int, max_iter: int, now: float,
                  submit: Callable[[str], str], *, echo: bool = True) -> str:
    """Submit the chain's next runner with ``submit(job_name)``.

    The intention is saved first: a crash between here and sbatch is
    resolved on restart by looking the runner up by its unique name; and
    the runner, once started, checks that it is the chain's current one.
    """
    status.runner_seq += 1
    status.runner_job_id = ""
    status.runner_live = True
    status.iter_before = counter
    status.runner_submitted = now
    chain.save_status(status)
    job_id = submit(runner_job_name(status.chain_id, status.runner_seq))
    status.runner_job_id = job_id
    chain.save_status(status)
    chain.add_worker_id(job_id)
    chain.log(f"submitted runner {status.runner_seq}: job {job_id} (counter {counter}/{max_iter})", echo=echo)
    return job_id
