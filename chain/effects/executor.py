"""The executor: feeds an event to the protocol (``core.protocol.transition``),
keeps the caller's status record current, and carries out the effects in
their order. The only code that saves ``state.json``; the one retry path of
the protocol's scheduler calls, each with its own deadline.

One writer at a time: every save is a compare-and-save under the chain's
save lock (``ChainDir.saving``). The status on disk is read again; if
another process saved since this copy was read (its ``revision`` moved), the
events this copy applied since (``ChainStatus.unsaved``) are applied again
over that newer state, and the result is saved. Nothing another process
saved is lost, a cancel, a strike or a judged runner included; an event the
newer state no longer allows is refused as any illegal event is."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from chain.backends.base import Backend
from chain.core.events import (
    Cancel,
    Effect,
    Event,
    HookRan,
    Log,
    RecordSubmitter,
    RecordWorker,
    Save,
)
from chain.core.protocol import transition
from chain.core.retry import RetryPolicy
from chain.errors import ProtocolError, SchedulerError
from chain.store import ChainDir, ChainStatus

T = TypeVar("T")


@dataclass
class Executor:
    chain: ChainDir
    backend: Backend  # a Cancel effect needs it: an executor without one would drop a cancel
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def apply(self, status: ChainStatus, *events: Event) -> ChainStatus:
        """Feed ``events`` in order. ``status`` is updated in place (a job
        holds one status record through its loop: no stale copy survives an
        event) and returned. An event the chain's state does not allow is
        logged in chain.log and raised (``ProtocolError``): nothing of it,
        nor of the events after it, is applied; when it is the newer
        state.json another process saved that refuses it, ``status`` is that
        state.json's, as it stands."""
        for event in events:
            try:
                new, effects = transition(status, event)
            except ProtocolError as exc:
                self.chain.log(f"protocol: {exc}")
                raise
            _adopt(status, new)
            status.unsaved = [*status.unsaved, event]  # a list of its own: replace() shared the old one
            for effect in effects:
                self._carry_out(status, effect)
        return status

    def _save(self, status: ChainStatus) -> None:
        """Compare-and-save (this module's docstring)."""
        with self.chain.saving():  # real time: a SIGTERM raised from a job's sleep must not cut a save
            disk = self.chain.load_status()
            if disk is not None and disk.chain_id == status.chain_id and disk.revision != status.revision:
                self._rebase(status, disk)
            status.revision += 1
            try:
                self.chain.save_status(status)
            except BaseException:
                status.revision -= 1  # still the disk's own, its events still unsaved: the next save tries again
                raise
            status.unsaved = []

    def _rebase(self, status: ChainStatus, disk: ChainStatus) -> None:
        """``status`` becomes ``disk`` with this copy's unsaved events applied
        again (their effects were carried out the first time); an event
        ``disk`` does not allow leaves ``status`` equal to ``disk`` and is raised."""
        merged = disk
        try:
            for event in status.unsaved:
                merged, _ = transition(merged, event)
        except ProtocolError as exc:
            _adopt(status, disk)
            status.unsaved = []
            self.chain.log(f"protocol: {exc} (another process changed state.json first)")
            raise
        self.chain.log(
            f"state: {len(status.unsaved)} event(s) applied again over revision {disk.revision},"
            " saved by another process meanwhile",
            echo=False,
        )
        _adopt(status, merged)

    def recorder(self, status: ChainStatus) -> Callable[[dict[str, Any]], None]:
        """Where a hook's result goes (``effects.hooks``): into ``status.hooks``, saved."""

        def record(entry: dict[str, Any]) -> None:
            self.apply(status, HookRan(entry))

        return record

    def _carry_out(self, status: ChainStatus, effect: Effect) -> None:
        if isinstance(effect, Save):
            self._save(status)
        elif isinstance(effect, Log):
            self.chain.log(effect.line, echo=effect.echo)
        elif isinstance(effect, RecordWorker):
            self.chain.add_worker_id(effect.job_id)
        elif isinstance(effect, RecordSubmitter):
            self.chain.add_submitter_id(effect.job_id)
        elif isinstance(effect, Cancel):
            self._cancel(effect)

    def _cancel(self, effect: Cancel) -> None:
        """A queued runner: a failed cancel is logged, not raised (the runner
        exits at once anyway, finding itself not the chain's current one)."""
        try:
            self.backend.cancel(effect.job_id)
            self.chain.log(f"next runner: cancelled the queued runner job {effect.job_id}", echo=effect.echo)
        except SchedulerError as exc:
            self.chain.log(
                f"next runner: cancel of the queued runner job {effect.job_id} failed: {exc}", echo=effect.echo
            )

    def retry(self, what: str, call: Callable[[], T], give_up: float) -> T:
        """``call()`` repeated through a scheduler outage (each failure
        logged) until ``give_up`` on this executor's clock, no attempt
        started that would end past it; then its last ``SchedulerError``.
        The backend's own policy absorbs blips within each attempt."""
        policy = RetryPolicy.until(lambda: self.clock() + policy.maximum >= give_up, self.sleep)
        return policy.call(call, on_retry=lambda line: self.chain.log(f"{what}: {line}; retrying"))


def _adopt(status: ChainStatus, new: ChainStatus) -> None:
    """``status`` takes every field of ``new``: the caller's record stays the one it holds."""
    for f in fields(status):
        setattr(status, f.name, getattr(new, f.name))
