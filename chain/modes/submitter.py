"""Submitter mode: a submitter job drives the chain, one runner at a time
(``chain.jobs.submitter``); it hands over to its successor before its own
wall time. The default."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from chain.backends.base import Backend, JobInfo
from chain.core.events import SubmitterQueued
from chain.core.names import SUBMITTER_SCRIPT, submitter_job_name
from chain.core.settings import Mode, Settings
from chain.effects.executor import Executor
from chain.modes.base import ModeDriver, RunnerJob
from chain.modes.common import FINISHING_WAIT, presubmit_first_runner, refuse_live_submitter
from chain.store import ChainStatus

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobNeeds


class SubmitterMode(ModeDriver):
    mode = Mode.SUBMITTER
    has_submitter = True

    def needs(self, lookahead: bool) -> JobNeeds:
        from chain.core.limits import JobNeeds

        # submitter, runner and, at a handover, the successor submitter; the runner queued ahead with lookahead
        return JobNeeds(self.mode, 3 + int(lookahead), "at a handover (submitter, runner, successor)", 2, lookahead)

    def start(self, run: Executor, status: ChainStatus, settings: Settings, workdir: Path) -> str:
        """The first runner (adopted by the submitter), then the submitter."""
        presubmit_first_runner(run, status, settings, workdir)
        job_id = run.backend.submit(
            run.chain.script(SUBMITTER_SCRIPT),
            job_name=submitter_job_name(status.chain_id, status.submitter_cycle),
            cwd=workdir,
        )
        run.apply(status, SubmitterQueued(job_id))
        return job_id

    def refuse_resume(self, backend: Backend, status: ChainStatus, notify: Callable[[str], None] | None) -> None:
        refuse_live_submitter(backend, status, wait=FINISHING_WAIT, notify=notify)

    def run_runner(self, job: RunnerJob) -> int:
        from chain.jobs.runner import run_promoted  # the job's code, loaded in the job only

        return run_promoted(job)

    def stranded(self, status: ChainStatus, jobs: Mapping[str, JobInfo], cancelling: bool) -> str:
        if cancelling or status.state.ended or not status.submitter_job_id:
            return ""
        info = jobs.get(status.submitter_job_id)
        return "its submitter job has ended" if info is None or not info.state.active else ""
