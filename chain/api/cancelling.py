"""``chain cancel``: stop the submitter and the runner, mark the chain cancelled.

The jobs are cancelled whatever the chain directory lets chain write: a
directory made read-only or immutable (or a file in it that is not chain's)
costs the record of the cancel, never the cancel itself. What could not be
written is said in one line, which ends the command with an error."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from chain.api.config import stored_settings
from chain.api.status import open_chain
from chain.backends import make_backend
from chain.backends.base import Backend, wait_gone
from chain.core.retry import RetryPolicy
from chain.effects.ending import mark_cancelled
from chain.effects.executor import Executor
from chain.errors import ChainDirError, ChainError, ProtocolError
from chain.modes.common import known_submitters
from chain.store import ChainStatus

# A person waits on chain cancel: a write the file system refuses is said at
# once (the jobs ride out such refusals for minutes: ChainDir.storage).
CANCEL_STORAGE = RetryPolicy(attempts=1, retry_on=OSError)


def cancel(
    chain_dir: Path,
    *,
    wait: float = 60.0,
    backend: Backend | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Stop the submitter and the runner (the app gets SIGTERM and may
    checkpoint), and mark the chain cancelled. ``backend``: as ``submit``.
    Raises ``ChainError`` naming what could not be recorded, after the jobs
    are cancelled."""
    view = open_chain(chain_dir)
    chain, status = view.chain, view.status
    chain = dataclasses.replace(chain, storage=CANCEL_STORAGE)
    failed: list[str] = []
    with chain.locked():  # not beside a resume or another cancel
        status = chain.load_status() or status
        if status.state.ended:
            return f"chain {status.chain_id} already {status.state.value}"
        if backend is None:
            backend = make_backend(status.backend or "slurm", chain_dir)
        _attempt(failed, "leave the cancel mark", chain.request_cancel)
        watched = _cancel_jobs(backend, status)
    wait_gone(backend, watched, wait, sleep=sleep, clock=clock)  # they end on their own; others may read meanwhile
    run = Executor(chain, backend, clock, sleep)  # the command's one executor
    ended: list[str] = []
    with chain.locked():
        _attempt(failed, "record the cancel", lambda: ended.extend(_mark(run, status)))
    if failed:
        could_not = "; nor ".join(failed)
        raise ChainError(f"chain {status.chain_id}: its jobs are cancelled, but chain could not {could_not}")
    if ended:
        return f"chain {status.chain_id} already {ended[0]}"
    return f"chain {status.chain_id} cancelled"


def _mark(run: Executor, status: ChainStatus) -> list[str]:
    """Record the cancel; the state the chain reached on its own instead, when
    its last job ended it (a runner completing it, which saves without the
    chain's lock) between this look and the save: its end stands."""
    settings = stored_settings(run.chain)
    status = run.chain.load_status() or status
    try:
        mark_cancelled(run, status, "cancelled by chain cancel", settings=settings)
    except ProtocolError:
        now = run.chain.load_status()
        if now is None or not now.state.ended:
            raise
        return [now.state.value]
    return []


def _attempt(failed: list[str], what: str, step: Callable[[], None]) -> None:
    """Do ``step``; when the chain directory refuses it, add why to ``failed``."""
    try:
        step()
    except ChainDirError as exc:  # a file that is not chain's, a corrupt one: it says which
        failed.append(f"{what}: {exc}")
    except OSError as exc:  # read-only, immutable, full: which file, and the system's word
        where = f" in {exc.filename}" if exc.filename else ""
        failed.append(f"{what}{where}: {exc.strerror or exc}")


def _cancel_jobs(backend: Backend, status: ChainStatus) -> list[str]:
    """Cancel every job of the chain; the ones to watch until they are gone."""
    submitters = set(known_submitters(backend, status))
    for job in sorted(submitters):
        backend.cancel(job)
    runners = status.runner_jobs()  # the live one first: Slurm sends it SIGTERM, the app can checkpoint
    for job in runners:
        backend.cancel(job)
    # every runner watched, a queued one too: the record may call a runner
    # queued that has just started (a relay's successor), whose app then
    # checkpoints as the live one's does; one pending at the scheduler ends at once
    return sorted(submitters | set(runners))
