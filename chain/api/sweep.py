"""Sweeps: many chains submitted and waited on at a cost to the scheduler
that does not grow with their number.

``submit_many`` runs at most ``parallel`` submissions (each an ``sbatch``)
at once. ``wait_all`` watches the chains' own state files, which their jobs
write (a local read, no scheduler call), and asks the scheduler about all
the chains still running in one batched query every ``check`` seconds, only
to find a chain that nothing drives any more (its submitter preempted or
scancelled, a relay scancelled): 40 or 4 000 chains cost the controller one
request every two minutes by default, where a ``wait()`` per chain asks once
per chain per poll. ``stranded_chains`` is that one query, which
``chain sweep status`` (``chain.api.sweep_handle.Sweep.status``) makes too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chain.api.config import LimitsMemo
from chain.errors import ChainError
from chain.store import ChainDir, ChainStatus

if TYPE_CHECKING:
    from chain.api.handle import Chain
    from chain.api.status import StatusReport
    from chain.backends.base import Backend

CHECK_EVERY = 120.0  # seconds between the batched scheduler queries of wait_all


def submit_many(
    specs: Iterable[Mapping[str, Any]], *, parallel: int = 4, backend: Backend | None = None
) -> list[Chain]:
    """``Chain.submit(**spec)`` for each spec, at most ``parallel`` at once;
    the chains in the specs' order. A ``ChainError`` naming every spec that
    failed (after the others were submitted: those run)."""
    from chain.api.handle import Chain

    if parallel < 1:
        raise ChainError(f"parallel must be at least 1, got {parallel}")
    specs = [dict(spec) for spec in specs]
    limits = LimitsMemo()  # the site's job limits asked once for the sweep, not once a chain

    def one(spec: dict[str, Any]) -> Chain | ChainError:
        try:
            return Chain.submit(**{**spec, **({"backend": backend} if backend else {})}, limits=limits)
        except ChainError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001  (one bad spec must not lose the others' handles)
            return ChainError(f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(one, specs))
    failed = [f"{spec.get('workdir', '.')}: {r}" for spec, r in zip(specs, results) if isinstance(r, ChainError)]
    if failed:
        raise ChainError(
            f"{len(failed)} of {len(specs)} chains were not submitted ({'; '.join(failed[:3])}"
            + ("; ..." if len(failed) > 3 else "")
            + "); the others run"
        )
    return [r for r in results if not isinstance(r, ChainError)]


def wait_all(
    chains: Sequence[Chain],
    *,
    timeout: float | None = None,
    poll: float = 10.0,
    check: float = CHECK_EVERY,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    backend: Backend | None = None,
) -> list[StatusReport]:
    """Wait until every chain has ended; their final status reports, in order.

    The state files are read every ``poll`` seconds; the scheduler is asked
    once every ``check`` seconds, in one query for all chains not ended, and
    a chain that nothing drives on two such checks in a row ends the wait with
    a ``ChainError`` naming it (``chain submit --resume`` continues it), as
    does ``timeout`` (the chains go on)."""
    give_up = None if timeout is None else clock() + timeout
    waiting = {chain.chain_dir: chain for chain in chains}
    next_check, suspects = clock() + check, set[Path]()
    while waiting:
        statuses = _not_ended(waiting)
        if not waiting:
            break
        if clock() >= next_check:
            stuck = stranded_chains(statuses, backend).stranded
            _refuse_stranded_twice(stuck, suspects)
            suspects, next_check = set(stuck), clock() + check
        if give_up is not None and clock() >= give_up:
            raise ChainError(f"{len(waiting)} of {len(chains)} chains still running after {timeout:.0f}s")
        sleep(poll)
    return [chain.status(history=0) for chain in chains]


def _not_ended(waiting: dict[Path, Chain]) -> dict[Path, ChainStatus]:
    """Read each waited-on chain's state once: the ended ones leave ``waiting``;
    the readable states of the others."""
    statuses = {d: readable_status(d) for d in waiting}
    for directory, status in statuses.items():
        if status is not None and status.state.ended:
            del waiting[directory]
    return {d: s for d, s in statuses.items() if d in waiting and s is not None}


def _refuse_stranded_twice(stuck: Mapping[Path, str], suspects: set[Path]) -> None:
    """End the wait on the chains nothing drove at this check and the one before."""
    if lost := [f"{d}: {why}" for d, why in stuck.items() if d in suspects]:
        raise ChainError(
            f"{len(lost)} chain(s) not over with nothing to drive them ({'; '.join(lost[:3])}"
            + ("; ..." if len(lost) > 3 else "")
            + "): chain submit --resume continues one"
        )


def readable_status(directory: Path) -> ChainStatus | None:
    """A chain's state as its jobs last wrote it; None when it cannot be read
    now (one chain's broken file does not end the wait for the others: it
    is read again at the next poll)."""
    try:
        return ChainDir(directory).load_status()
    except ChainError:
        return None


@dataclass(frozen=True)
class Driven:
    """What one scheduler query says of a sweep's chains: which ones nothing
    drives and why (``stranded``), which ones wait on a pending job and on
    what (``waiting``, ``chain.sweep.table.waiting_on``), and the first
    scheduler error ("" when every query was answered)."""

    stranded: dict[Path, str] = field(default_factory=dict)
    waiting: dict[Path, str] = field(default_factory=dict)
    error: str = ""


def stranded_chains(statuses: Mapping[Path, ChainStatus], given: Backend | None) -> Driven:
    """Which chains nothing drives, and why, and which wait on what: one
    query per backend kind for all of them (``given``: the backend to ask,
    else each chain's own). A chain whose backend did not answer is judged
    driven, and the error kept."""
    from chain.api.config import stored_settings
    from chain.api.status import stranded
    from chain.backends import make_backend
    from chain.errors import SchedulerError
    from chain.sweep.table import waiting_on

    by_backend: dict[tuple[str, str], list[Path]] = {}
    for directory, status in statuses.items():
        name = status.backend or "slurm"
        # the local backend keeps each chain's jobs in its own directory: one query each
        by_backend.setdefault((name, str(directory) if name == "local" else ""), []).append(directory)
    undriven: dict[Path, str] = {}
    waiting: dict[Path, str] = {}
    error = ""
    for (name, _), directories in by_backend.items():
        try:
            backend = given or make_backend(name, directories[0])
            slurm = backend.query([j for d in directories for j in statuses[d].live_jobs()])
        except (SchedulerError, ChainError) as exc:  # no answer: nothing is judged stranded on it
            error = error or str(exc)
            continue
        for directory in directories:
            if why_waiting := waiting_on(statuses[directory], slurm):
                waiting[directory] = why_waiting
            try:
                mode = stored_settings(ChainDir(directory)).mode
            except ChainError:
                continue
            cancelling = ChainDir(directory).cancel_requested()
            if why := stranded(statuses[directory], slurm, mode=mode, cancelling=cancelling):
                undriven[directory] = why
    return Driven(undriven, waiting, error)
