"""A runner's own record (``runners/<job>.json``): written by the runner as
it goes, read by the submitter (its outcome), ``chain cancel`` and ``chain
status`` (the current runner). One typed record, one codec."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from chain.store.codec import RecordError, decode, encode


class RunnerPhase(str, enum.Enum):
    STARTING = "starting"  # checking it is the chain's current runner
    RUNNING = "running"  # the app runs
    ENDED = "ended"  # outcome recorded: the submitter may judge it


@dataclass
class RunnerRecord:
    """What one runner job did. Times are epoch seconds; None: not yet known."""

    job_id: str
    job_name: str = ""
    seq: int | None = None
    status: RunnerPhase = RunnerPhase.STARTING
    host: str = ""
    nodes: list[str] = field(default_factory=list)  # the job's nodes as Slurm names them (SLURM_JOB_NODELIST)
    start: float | None = None
    end: float | None = None
    exit_code: int | None = None  # the runner's contract code (module doc of jobs.runner)
    app_exit_code: int | None = None
    detail: str = ""  # the runner's one-line account of how the app ended
    superseded: bool = False  # not the chain's current runner: the app never ran
    iter_before: int | None = None
    iter_after: int | None = None
    margin: int | None = None
    end_planned: float | None = None
    stop_at: float | None = None
    kill_at: float | None = None
    slurm_end: float | None = None
    app_start: float | None = None
    stop_sent: float | None = None
    stop_to_exit: float | None = None
    external_signal: str | None = None  # a signal the runner got from outside (scancel, preemption)
    preempted: bool = False  # that signal was Slurm's preemption (scontrol's PreemptTime was set)
    killed: bool = False  # the app outlived the grace after the stop signal
    stalled: float | None = None  # seconds without a sign of progress when the watchdog stopped the app
    # how far the app got, when something tells (--progress-pattern): the first and the
    # last iteration it printed; what it computed beyond its checkpoint is work to be redone
    iter_first: int | None = None
    iter_reached: int | None = None
    saved_at: float | None = None  # the checkpoint file's mtime at the app's exit, when it is a file
    argv: list[str] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.status is RunnerPhase.ENDED

    def to_json(self) -> dict[str, Any]:
        return encode(self, skip_none=True)

    @classmethod
    def from_json(cls, data: Any) -> RunnerRecord | None:
        """The record, or None when it is unreadable (a runner that died
        mid-write counts as one that wrote nothing)."""
        try:
            return decode(cls, data)
        except RecordError:
            return None
