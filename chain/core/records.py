"""The runners' records, typed, one codec:

- ``RunnerRecord``, a runner's own record (``runners/<job>.json``): written
  by the runner as it goes, read by the submitter (its outcome), ``chain
  cancel`` and ``chain status`` (the current runner);
- ``JudgedRunner``, one line of ``runners.jsonl``: the judgment of a runner,
  written once by whoever judged it (``effects.ending``), read by ``chain
  status``, ``chain logs``, ``chain list`` and the report;
- ``RunnerView``, the two merged, as the metrics and the report read a runner.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chain.core.decision import Verdict
from chain.core.model import JobState
from chain.core.reasons import ReasonKind
from chain.primitives.bounded import loads_json
from chain.primitives.codec import RecordError, decode, encode

if TYPE_CHECKING:
    from chain.core.status import ChainStatus


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
    stopped_on_signal: bool = False  # the app exited by itself after the stop signal (core.runner_rules.exited_on_stop)
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
    # the counter the app resumed from when the runner set newer checkpoints aside (they failed
    # verification): iter_before stays the counter chain had recorded; the difference is redone
    iter_resumed: int | None = None
    argv: list[str] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.status is RunnerPhase.ENDED

    def to_json(self) -> dict[str, Any]:
        return encode(self, skip_none=True)

    @classmethod
    def from_json(cls, data: Any, *, lenient: bool = False) -> RunnerRecord | None:
        """The record, or None when it is unreadable (a runner that died
        mid-write counts as one that wrote nothing); ``lenient``: a field
        that does not fit is unknown (the report uses what it can)."""
        try:
            return decode(cls, data, lenient=lenient)
        except RecordError:
            return None


# What a judged line carries of the runner's own record only when the record
# tells it (the report tells known from unknown redone work with them).
LOST_WORK_FACTS = (
    "app_exit_code",
    "stop_sent",
    "killed",
    "external_signal",
    "iter_first",
    "iter_reached",
    "saved_at",
    "iter_resumed",
)
# The keys ``chain status --json`` shows of a judged runner (its runners table).
TABLE_KEYS = (
    "job_id",
    "seq",
    "state",
    "exit_code",
    "iter_before",
    "iter_after",
    "verdict",
    "reason",
    "start",
    "end",
    "kind",  # last: the keys before it are as earlier versions showed them
)


@dataclass
class JudgedRunner:
    """One line of ``runners.jsonl``: a runner as it was judged. The line
    always has the fields up to ``recorded`` (null when unknown), and the
    ``LOST_WORK_FACTS`` only when its record told them. Lines of earlier
    versions are read as far as they go (``from_line``): one without a
    ``kind`` has it from its words (``core.legacy``)."""

    job_id: str = ""
    seq: int | None = None
    state: JobState | None = None  # the scheduler's state of the job at its end (None: not asked)
    exit_code: int | None = None  # the runner's contract code (none: it wrote no record)
    iter_before: int | None = None
    iter_after: int | None = None
    verdict: Verdict | None = None  # None: a line that does not say (torn, or hand-edited)
    reason: str = ""  # for a person
    kind: ReasonKind | None = None  # for code: what the reason says happened
    start: float | None = None
    end: float | None = None
    submitted: float | None = None
    stop_to_exit: float | None = None
    recorded: bool = False  # the runner wrote its end record
    app_exit_code: int | None = None
    stop_sent: float | None = None
    killed: bool | None = None
    external_signal: str | None = None
    iter_first: int | None = None
    iter_reached: int | None = None
    saved_at: float | None = None
    iter_resumed: int | None = None

    @property
    def wall(self) -> float | None:
        return self.end - self.start if self.end is not None and self.start is not None else None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in encode(self).items() if v is not None or k not in LOST_WORK_FACTS}

    def table_json(self) -> dict[str, Any]:
        """The runners table's fields (``chain status --json``)."""
        return {k: getattr(self, k) for k in TABLE_KEYS}

    @classmethod
    def from_json(cls, data: Any) -> JudgedRunner | None:
        """The line's runner, keeping every field that is valid (a field of
        the wrong type is unknown; a number for a job id, its text); None
        when it is not a JSON object."""
        if not isinstance(data, dict):
            return None
        if isinstance(data.get("job_id"), int) and not isinstance(data["job_id"], bool):
            data = dict(data, job_id=str(data["job_id"]))
        judged = decode(cls, data, lenient=True)
        if "kind" not in data:  # written before kinds: its kind is read once, here, from its words
            from chain.core.legacy import legacy_kind  # only for 0.1.0's files: not in every job's start

            judged.kind = legacy_kind(judged.reason)
        return judged

    @classmethod
    def from_line(cls, line: str) -> JudgedRunner | None:
        """A line of ``runners.jsonl``; None for a torn one (a crash mid-append)
        or one past ``chain.primitives.bounded``'s bounds (too deep, a number too long)."""
        try:
            return cls.from_json(loads_json(line))
        except ValueError:  # json.JSONDecodeError, bounded.BoundError
            return None


def judged_runner(
    status: ChainStatus,
    record: RunnerRecord | None,
    *,
    state: JobState | None,
    exit_code: int | None,
    iter_before: int | None,
    iter_after: int | None,
    verdict: Verdict,
    reason: str,
    kind: ReasonKind,
    recorded: bool,
) -> JudgedRunner:
    """The line ``runners.jsonl`` keeps for the chain's current runner, its
    own ``record`` (if it wrote one) giving its times and lost-work facts."""
    facts = {key: getattr(record, key) for key in LOST_WORK_FACTS} if record else {}
    return JudgedRunner(
        job_id=status.runner_job_id,
        seq=status.runner_seq,
        state=state,
        exit_code=exit_code,
        iter_before=iter_before,
        iter_after=iter_after,
        verdict=verdict,
        reason=reason,
        kind=kind,
        submitted=status.runner_submitted,
        start=record.start if record else None,
        end=record.end if record else None,
        stop_to_exit=record.stop_to_exit if record else None,
        recorded=recorded,
        **facts,
    )


@dataclass(frozen=True)
class RunnerView:
    """A runner as the metrics and the report read it: its judgment's values
    where it has them, else its own record's (``merge``); either may be missing."""

    job_id: str = ""
    seq: int | None = None
    host: str = ""
    submitted: float | None = None
    start: float | None = None
    end: float | None = None
    iter_before: int | None = None
    iter_after: int | None = None
    exit_code: int | None = None
    app_exit_code: int | None = None
    verdict: Verdict | None = None
    reason: str | None = None
    kind: ReasonKind | None = None
    stop_sent: float | None = None
    stop_to_exit: float | None = None
    superseded: bool = False
    killed: bool = False
    iter_first: int | None = None
    iter_reached: int | None = None
    saved_at: float | None = None
    iter_resumed: int | None = None
    ended: bool = False  # its record says it ended
    judged: bool = False  # a line of runners.jsonl judged it

    @classmethod
    def merge(cls, job_id: str, record: RunnerRecord | None, judged: JudgedRunner | None) -> RunnerView:
        def known(name: str) -> Any:
            mine = getattr(judged, name, None)
            return mine if mine is not None else getattr(record, name, None)

        return cls(
            job_id=job_id,
            host=record.host if record else "",
            **{name: known(name) for name in _MERGED},
            verdict=judged.verdict if judged else None,
            reason=judged.reason if judged else None,
            kind=judged.kind if judged else None,
            submitted=judged.submitted if judged else None,
            superseded=bool(record and record.superseded),
            killed=bool(known("killed")),
            ended=bool(record and record.ended),
            judged=judged is not None,
        )

    @classmethod
    def window(cls, judged: Iterable[JudgedRunner], live: RunnerRecord | None = None) -> list[RunnerView]:
        """The judged runners, then the live one by its own record: what
        ``chain status`` and ``chain list`` measure the rate on."""
        views = [cls.merge(j.job_id, None, j) for j in judged]
        return views + ([cls.merge(live.job_id, live, None)] if live else [])


_MERGED = (
    "seq",
    "start",
    "end",
    "iter_before",
    "iter_after",
    "exit_code",
    "app_exit_code",
    "stop_sent",
    "stop_to_exit",
    "iter_first",
    "iter_reached",
    "saved_at",
    "iter_resumed",
)
