"""The modes' drivers (``chain.modes.base.ModeDriver``), one per ``--mode``,
registered here once: a new mode is one new module and one line below."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chain.core.settings import Mode
from chain.modes.base import Look, ModeDriver, RunnerJob
from chain.modes.relay import RelayMode
from chain.modes.submitter import SubmitterMode

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobNeeds

DRIVERS: dict[Mode, ModeDriver] = {d.mode: d for d in (SubmitterMode(), RelayMode())}


def driver(mode: Mode) -> ModeDriver:
    """The driver of ``mode`` (a mode without one is a fault in chain)."""
    return DRIVERS[mode]


def least_needs() -> JobNeeds:
    """The needs of the mode that queues the fewest jobs (``core.limits.room`` names it when it fits)."""
    return min((d.needs(False) for d in DRIVERS.values()), key=lambda needs: (needs.queued, needs.running))


__all__ = ["DRIVERS", "Look", "ModeDriver", "RunnerJob", "driver", "least_needs"]
