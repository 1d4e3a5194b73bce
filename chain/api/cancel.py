"""``chain cancel``: stop the submitter and the runner, mark the chain cancelled."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from chain.api.status import open_chain
from chain.api.submission import known_submitters
from chain.backends import make_backend
from chain.backends.base import Backend
from chain.core.model import ChainState
from chain.store import (
    runner_entry,
)

if TYPE_CHECKING:
    pass



def cancel(chain_dir: Path, *, wait: float = 60.0, backend: Backend | None = None) -> str:
    """Stop the submitter and the runner (the app gets SIGTERM and may
    checkpoint), and mark the chain cancelled. ``backend``: as ``submit``."""
    chain, status = open_chain(chain_dir)
    if status.state.ended:
        return f"chain {status.chain_id} already {status.state.value}"
    if backend is None:
        backend = make_backend(status.backend or "slurm", chain_dir)
    chain.cancel_file.write_text(f"{time.time()}\n", encoding="utf-8")
    submitters = set(known_submitters(backend, status))
    for job in sorted(submitters):
        backend.cancel(job)
    runner = status.runner_job_id if status.runner_live else ""
    if runner:
        backend.cancel(runner)  # Slurm sends SIGTERM first: the app can checkpoint
    if status.next_job_id:
        backend.cancel(status.next_job_id)  # lookahead's pre-queued runner
    watched = sorted(submitters | ({runner} if runner else set()))
    deadline = time.time() + wait
    while time.time() < deadline:
        infos = backend.query(watched)
        if not any(i.state.active for i in infos.values()):
            break
        time.sleep(0.5)
    status = chain.load_status() or status
    if status.runner_live and status.runner_job_id:
        # The submitter was stopped before it could judge its runner.
        record = chain.read_record(status.runner_job_id) or {}
        chain.judge_runner(runner_entry(
            status, record, state="CANCELLED", exit_code=record.get("exit_code"),
            iter_before=record.get("iter_before", status.iter_before),
            iter_after=record.get("iter_after", status.iter_before), verdict="stop",
            reason="cancelled by chain cancel", recorded="exit_code" in record))
        status.runner_live = False
    if status.next_job_id:
        chain.log(f"lookahead: cancelled the pre-queued runner job {status.next_job_id}", echo=False)
        status.next_job_id = ""
    if not status.state.ended:
        status.state = ChainState.CANCELLED
        status.reason = "cancelled by chain cancel"
    chain.save_status(status)
    chain.log(f"chain {status.chain_id} cancelled", echo=False)
    return f"chain {status.chain_id} cancelled"
