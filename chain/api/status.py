"""The status report: everything ``chain status`` shows, one typed record
(``StatusReport``) whose ``to_json`` is ``chain status --json``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.backends import make_backend
from chain.backends.base import Backend, JobInfo, JobState, wait_gone
from chain.backends.shared_query import WATCH_FRESH_FOR, SharedQuery, cache_dir
from chain.core.model import ChainState
from chain.core.records import JudgedRunner, RunnerRecord, RunnerView
from chain.core.settings import Mode
from chain.errors import ChainError, SchedulerError
from chain.modes import driver
from chain.primitives.codec import encode
from chain.store import ChainDir, ChainStatus, tail_lines
from chain.store.view import ChainView

METRICS_WINDOW = 200  # rate, ETA and efficiency over the last runners: O(1) status on long chains
FAILURE_TAIL_LINES = 12


@dataclass
class FailureOutput:
    """The failing runner's output: where it is, and its last lines."""

    job_id: str
    log: str
    tail: list[str] = field(default_factory=list)
    seq: int | None = None  # the runner's number (runner 2, job 3), as the runners table and chain logs show it


@dataclass
class StatusReport:
    """What ``chain status`` shows; ``to_json()`` is ``chain status --json``."""

    chain_id: str
    state: ChainState
    iteration: int
    max_iter: int
    backend: str = ""
    mode: Mode = Mode.SUBMITTER
    reason: str = ""
    submitter_cycle: int = 0
    submitter_job_id: str = ""
    submitter_state: str = ""  # the scheduler's state of it ("" unknown or not asked)
    runner_job_id: str = ""  # the current runner, "" when none is live
    runner_state: str = ""
    next_job_id: str = ""  # the runner queued behind the current one (relay, lookahead)
    next_state: str = ""
    relay_broken: str = ""  # relay: why the successor could not be queued
    excluded_nodes: list[str] = field(default_factory=list)  # left out of later runners (core.exclusion)
    current_runner: RunnerRecord | None = None
    runners: list[JudgedRunner] = field(default_factory=list)
    runner_count: int = 0
    hooks: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    created: float = 0.0
    updated: float = 0.0
    completed_at: float | None = None
    workdir: str = ""
    chain_dir: str = ""
    log: str = ""
    scheduler_error: str = ""
    nothing_driving: bool = False  # not over, yet no job of it is alive
    # relay: its runner or queued successor was scancelled and nothing of it is left (why, or ""):
    # said, never settled here (chain status only reads; chain cancel closes it)
    cancelled_outside: str = ""
    # jobs of it the scheduler shows FAILED that never wrote their log: Slurm failed them
    # before chain started in them (a chain directory the node cannot write: exit 0:53)
    never_started: list[str] = field(default_factory=list)
    failure: FailureOutput | None = None

    @property
    def has_submitter(self) -> bool:
        """A submitter job drives the chain (its mode's driver says; else its runners do)."""
        return driver(self.mode).has_submitter

    @property
    def submitter_lost(self) -> bool:
        """The chain is not over but nothing drives it (resume it)."""
        return (
            self.has_submitter
            and self.state in (ChainState.RUNNING, ChainState.PENDING)
            and (self.nothing_driving or (bool(self.submitter_state) and JobState.parse(self.submitter_state).final))
        )

    @property
    def stalled(self) -> bool:
        """A chain driven by its runners, not over, with none running or queued (resume it)."""
        return not self.has_submitter and not self.state.ended and self.nothing_driving

    @property
    def cannot_start(self) -> bool:
        """Nothing of the chain runs and some of its jobs failed before chain
        started in them (``never_started``): no end will come to wait for."""
        return bool(self.never_started) and self.nothing_driving

    @property
    def never_started_text(self) -> str:
        """``never_started`` as one clause, for ``chain status`` and ``Chain.wait``."""
        jobs = ", ".join(self.never_started)
        if len(self.never_started) == 1:
            return f"job {jobs} failed before chain started in it"
        return f"jobs {jobs} failed before chain started in them"

    @property
    def current_runner_number(self) -> int:
        """The live runner's sequence number: its own record's, else one past
        every judged runner (not past the ``--history`` rows shown)."""
        if self.current_runner is not None and self.current_runner.seq is not None:
            return self.current_runner.seq
        return (self.runner_count or len(self.runners)) + 1

    def to_json(self) -> dict[str, Any]:
        data = encode(self)
        data["current_runner"] = self.current_runner.to_json() if self.current_runner else None
        data["runners"] = [r.table_json() for r in self.runners]
        data["failure"] = encode(self.failure) if self.failure else None
        return data


def open_chain(chain_dir: str | os.PathLike[str]) -> ChainView:
    """The chain in ``chain_dir`` as read once (a one-line error if none): its ``ChainView``."""
    return ChainView.open(chain_dir, lenient=True)


SETTLE_WAIT = 30.0  # seconds an ended chain's last jobs get to leave (a submitter exits within ~1 s)


def wait_jobs_gone(
    chain_dir: Path,
    *,
    backend: Backend | None = None,
    timeout: float = SETTLE_WAIT,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """After a chain's end, wait (at most ``timeout`` seconds) until the jobs
    that ended it have left: the chain turns completed (or failed, ...)
    before its submitter, or its last relay runner, exits, and until then the
    job (and the local backend's supervisor) may still write into the chain
    directory. ``--wait`` returns after this, so removing the directory at
    once never races a last write. Reads only."""
    status = open_chain(chain_dir).status
    ids = sorted(status.named_jobs())
    if ids:
        wait_gone(backend or make_backend(status.backend or "slurm", chain_dir), ids, timeout, sleep=sleep, clock=clock)


def status_report(
    chain_dir: Path,
    *,
    live: bool = True,
    history: int | None = None,
    backend: Backend | None = None,
    watching: bool = False,
) -> StatusReport:
    """Everything ``chain status`` shows. ``history``: judged runners listed
    (all when None); ``live``: ask the scheduler about the live jobs;
    ``backend``: as ``submit`` (by default the chain's own); ``watching``:
    for a view that looks again every few seconds, a job state this user's
    watchers on this node saw within ``shared_query.WATCH_FRESH_FOR``
    seconds is taken as it is (``backends.shared_query``), not asked again."""
    view = ChainView.open(chain_dir)
    chain, status, settings = view.chain, view.status, view.settings()
    mode = driver(settings.mode)
    fresh_for = WATCH_FRESH_FOR if watching else 0.0
    slurm, scheduler_error, asked = _ask_scheduler(status, chain_dir, backend, fresh_for) if live else ({}, "", None)
    if history is None:
        runners = list(chain.iter_runners())
        total, recent = len(runners), runners[-METRICS_WINDOW:]
    else:
        recent, total = chain.recent_runners(max(history, METRICS_WINDOW))
        runners = recent[-history:] if history else []
    current = view.current_runner()
    iteration = view.counter  # what the jobs last recorded, refreshed from the checkpoint where that runs no program

    from chain.reporting.metrics import chain_metrics

    metrics = chain_metrics(
        RunnerView.window(recent[-METRICS_WINDOW:], current),
        iteration,
        settings.max_iter,
        time.time(),
        ended=status.state.ended,
    )
    report = StatusReport(
        chain_id=status.chain_id,
        state=status.state,
        iteration=iteration,
        max_iter=settings.max_iter,
        backend=status.backend,
        mode=settings.mode,
        reason=status.reason,
        submitter_cycle=status.submitter_cycle,
        submitter_job_id=status.submitter_job_id,
        submitter_state=_job_state(slurm, status.submitter_job_id),
        runner_job_id=status.runner_job_id if status.runner_live else "",
        runner_state=_job_state(slurm, status.runner_job_id) if status.runner_live else "",
        next_job_id=status.next_job_id,
        next_state=_job_state(slurm, status.next_job_id),
        relay_broken=status.relay_broken,
        excluded_nodes=list(status.excluded_nodes),
        current_runner=current,
        runners=runners,
        runner_count=total,
        hooks=status.hooks,
        metrics=metrics,
        outputs=_outputs(chain),
        created=status.created,
        updated=status.updated,
        completed_at=status.completed_at or None,
        workdir=status.workdir,
        chain_dir=str(chain.root),
        log=str(chain.log_file),
        scheduler_error=scheduler_error,
        nothing_driving=bool(live and not scheduler_error and mode.stranded(status, slurm, cancelling=False)),
        cancelled_outside=(
            mode.cancelled_outside(status, slurm, chain.cancel_file.exists()) if asked is not None else ""
        ),
        never_started=_never_started(chain, status, slurm),
    )
    if status.state in (ChainState.FAILED, ChainState.STOPPED):
        report.failure = _failure_output(chain, runners[-1] if runners else chain.last_runner())
    return report


def _ask_scheduler(
    status: ChainStatus, chain_dir: Path, backend: Backend | None, fresh_for: float = 0.0
) -> tuple[dict[str, JobInfo], str, Backend | None]:
    """The live jobs' states (a shared answer up to ``fresh_for`` seconds
    old), or the scheduler's error (the view goes on), and the backend that
    answered (``backend``, else one made for the chain's own; None on an
    error or when the chain has ended)."""
    if status.state.ended:
        return {}, "", None
    ids = status.live_jobs()
    try:
        backend = backend or make_backend(status.backend or "slurm", chain_dir)
        if fresh_for > 0 and not backend.cheap_queries:
            return SharedQuery(backend, cache_dir(), fresh_for).query(ids), "", backend
        return backend.query(ids), "", backend
    except SchedulerError as exc:
        return {}, str(exc), None


def stranded(status: ChainStatus, slurm: Mapping[str, JobInfo], *, mode: Mode, cancelling: bool = False) -> str:
    """Why no job of a chain that is not over can move it (``slurm``: the
    scheduler's answer about ``ChainStatus.live_jobs``), or "": what ``chain status``
    shows as "nothing drives it", "stalled" or "cancelled outside chain"
    (nothing while ``chain cancel`` is at work: ``cancelling``)."""
    return driver(mode).stranded(status, slurm, cancelling)


def _never_started(chain: ChainDir, status: ChainStatus, slurm: Mapping[str, JobInfo]) -> list[str]:
    """The chain's jobs the scheduler shows FAILED, with no exit status of
    their own (a script that ran and exited 1 started), that left no log:
    Slurm opens a job's ``--output`` before anything of it runs, so such a
    job failed before chain started in it (0:53: the log could not be
    opened). A log that cannot be looked at (a tampered logs directory) is
    not taken as missing."""
    jobs = [(status.submitter_job_id, chain.submitter_output)] + [
        (j, chain.runner_output) for j in status.runner_jobs()
    ]
    found: list[str] = []
    for job, output in jobs:
        info = slurm.get(job) if job else None
        if info is None or info.state is not JobState.FAILED or info.exit_code not in (None, 0):
            continue
        try:
            if output(job).exists():
                continue
        except (ChainError, OSError):
            continue
        found.append(job)
    return found


def _job_state(slurm: Mapping[str, JobInfo], job_id: str) -> str:
    info = slurm.get(job_id)
    return info.state.value if info else ""


def _outputs(chain: ChainDir) -> list[str]:
    return [
        str(p)
        for p in (chain.reports / "usage.csv", chain.reports / "summary.json", chain.reports / "progress.png")
        if p.exists()
    ]


def _failure_output(chain: ChainDir, runner: JudgedRunner | None) -> FailureOutput | None:
    """The failing runner's output: its path and last lines, for ``chain status``."""
    if runner is None or not runner.job_id:
        return None
    path = chain.runner_output(runner.job_id)
    return FailureOutput(runner.job_id, str(path), tail_lines(path, FAILURE_TAIL_LINES), seq=runner.seq)
