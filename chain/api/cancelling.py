"""``chain cancel``: stop the submitter and the runner, mark the chain cancelled."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from chain.api.config import stored_settings
from chain.api.status import open_chain
from chain.api.submission import known_submitters
from chain.backends import make_backend
from chain.backends.base import Backend
from chain.effects.ending import mark_cancelled
from chain.store import ChainStatus


def cancel(
    chain_dir: Path,
    *,
    wait: float = 60.0,
    backend: Backend | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Stop the submitter and the runner (the app gets SIGTERM and may
    checkpoint), and mark the chain cancelled. ``backend``: as ``submit``."""
    chain, status = open_chain(chain_dir)
    with chain.locked():  # not beside a resume or another cancel
        status = chain.load_status() or status
        if status.state.ended:
            return f"chain {status.chain_id} already {status.state.value}"
        if backend is None:
            backend = make_backend(status.backend or "slurm", chain_dir)
        chain.cancel_file.write_text(f"{time.time()}\n", encoding="utf-8")
        watched = _cancel_jobs(backend, status)
    deadline = clock() + wait  # the jobs end on their own; others may read meanwhile
    while clock() < deadline:
        if not any(i.state.active for i in backend.query(watched).values()):
            break
        sleep(0.5)
    with chain.locked():
        mark_cancelled(
            chain,
            chain.load_status() or status,
            "cancelled by chain cancel",
            backend=backend,
            settings=stored_settings(chain),
        )
    return f"chain {status.chain_id} cancelled"


def _cancel_jobs(backend: Backend, status: ChainStatus) -> list[str]:
    """Cancel every job of the chain; the ones to watch until they are gone."""
    submitters = set(known_submitters(backend, status))
    for job in sorted(submitters):
        backend.cancel(job)
    runner = status.runner_job_id if status.runner_live else ""
    if runner:
        backend.cancel(runner)  # Slurm sends SIGTERM first: the app can checkpoint
    if status.next_job_id:
        backend.cancel(status.next_job_id)  # lookahead's pre-queued runner
    return sorted(submitters | ({runner} if runner else set()))
