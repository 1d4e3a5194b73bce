"""The one small interface of a chain's mode (``--mode``): who drives the
chain, how it starts, what a resume must wait for, how a runner job runs,
when a chain is stranded, and the jobs it needs at its busiest.

Each mode is one driver (``chain.modes.submitter``, ``chain.modes.relay``),
registered once in ``chain.modes`` and chosen once from the settings
(``driver``); the rest of chain asks the driver, never which mode it is."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from chain.backends.base import Backend, JobInfo
from chain.core.records import RunnerRecord
from chain.core.settings import Mode, Settings
from chain.effects.executor import Executor
from chain.store import ChainDir, ChainStatus

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobNeeds

# accounting's lines, once it answers (``Backend.accounted_later``); None: it did not
Look = Callable[[], Mapping[str, JobInfo] | None]


@dataclass(frozen=True)
class RunnerJob:
    """A runner job, as its driver runs it (``chain.jobs.runner``)."""

    chain: ChainDir
    settings: Settings
    backend: Backend
    record: RunnerRecord
    workdir: Path
    preflight_error: str | None
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    # accounting's answer started before the job's code loaded (``ModeDriver.runner_look``); None: none started
    look: Look | None = None

    def limit_end(self) -> float:
        """This job's start plus its configured limit: its end by its own
        settings (Slurm's may be later: it rounds a limit up to minutes)."""
        return (self.record.start or self.clock()) + self.settings.runner_seconds


class ModeDriver(abc.ABC):
    """A mode. ``has_submitter``: a submitter job drives the chain (else its runners do)."""

    mode: ClassVar[Mode]
    has_submitter: ClassVar[bool]

    @abc.abstractmethod
    def needs(self, lookahead: bool) -> JobNeeds:
        """The jobs one chain holds at its busiest (``core.limits``)."""

    @abc.abstractmethod
    def start(self, run: Executor, status: ChainStatus, settings: Settings, workdir: Path) -> str:
        """Queue what starts (or resumes) the chain; the job to follow. Its
        events go through ``run``, the command's executor (its chain, its backend)."""

    @abc.abstractmethod
    def refuse_resume(self, backend: Backend, status: ChainStatus, notify: Callable[[str], None] | None) -> None:
        """Refuse (``ChainDirError``) to resume while a job of the chain still drives it."""

    @abc.abstractmethod
    def run_runner(self, job: RunnerJob) -> int:
        """A runner job of this mode; its exit code (``core.runner_rules``)."""

    def rerun_after_end(self, job: RunnerJob) -> None:
        """A runner job Slurm requeued after it recorded its end, before it
        leaves (it runs no app): what the mode still owes the chain. Nothing
        by default (the submitter judges the record)."""

    def runner_look(self, chain: ChainDir, backend: Backend, job_id: str, seq: int | None) -> Look | None:
        """The accounting look a runner job of this mode takes first, started
        before the job's code loads (``jobs.entry``) and handed to
        ``run_runner`` (``RunnerJob.look``); None (this default): none."""
        return None

    @abc.abstractmethod
    def stranded(self, status: ChainStatus, jobs: Mapping[str, JobInfo], cancelling: bool) -> str:
        """Why no job of a chain that is not over can move it (``jobs``: the
        scheduler's answer about ``ChainStatus.live_jobs``), or ""; nothing while
        ``chain cancel`` is at work (``cancelling``)."""

    def cancelled_outside(self, status: ChainStatus, jobs: Mapping[str, JobInfo], cancelling: bool) -> str:
        """A job of it scancelled outside chain left nothing to drive it: the reason to show, or ""."""
        return ""

    def no_submitter_log(self, status: ChainStatus) -> str:
        """Why the chain has no submitter output to show, when that is the mode's doing ("" otherwise)."""
        return ""

    @property
    def job_kind(self) -> str:
        """What ``start`` returns the id of."""
        return "submitter" if self.has_submitter else "runner"
