"""The protocol's vocabulary: the events fed to ``chain.core.protocol.transition``
(the facts the jobs and commands gather) and the effects it returns (what the
executor, ``chain.effects.executor``, carries out in order). Records only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chain.core.exclusion import EXCLUDE_AFTER
from chain.core.model import ChainState
from chain.core.reasons import ReasonKind


# --- effects: what the executor carries out, in order --------------------------------
@dataclass(frozen=True)
class Save:
    """Write ``state.json`` (atomically)."""


@dataclass(frozen=True)
class Log:
    line: str
    echo: bool = True  # also on the job's output


@dataclass(frozen=True)
class RecordWorker:
    """A runner job of the chain (``worker_ids.txt``: what ``chain cancel`` may cancel)."""

    job_id: str


@dataclass(frozen=True)
class RecordSubmitter:
    job_id: str


@dataclass(frozen=True)
class Cancel:
    """Cancel the runner queued behind the current one (a failure is logged)."""

    job_id: str
    echo: bool = True


Effect = Save | Log | RecordWorker | RecordSubmitter | Cancel


# --- events: the facts fed in --------------------------------------------------------
@dataclass(frozen=True)
class Prepared:
    """``chain submit``: the chain's files are written, its backend chosen."""

    backend: str
    workdir: str


@dataclass(frozen=True)
class Resumed:
    """``chain submit --resume``: the next submitter cycle, failure counters
    reset; with ``reset_excluded``, the nodes' strikes too (``core.exclusion``)."""

    reset_excluded: bool = False


@dataclass(frozen=True)
class RelayStarted:
    """A relay chain is (re)started: no submitter, its relay mended."""


@dataclass(frozen=True)
class SubmitterQueued:
    """A submitter job is queued (the first, or a successor at a handover)."""

    job_id: str


@dataclass(frozen=True)
class SubmitterStarted:
    """A submitter job started: it drives the chain now."""

    job_id: str


@dataclass(frozen=True)
class HandingOver:
    """The submitter is about to queue its successor (next cycle)."""


@dataclass(frozen=True)
class CounterRead:
    """The checkpoint counter as read between runners."""

    counter: int


@dataclass(frozen=True)
class RunnerIntended:
    """The next runner is about to be submitted (or promoted): saved first,
    so a crash before sbatch returns is found by the runner's unique name."""

    counter: int
    now: float


@dataclass(frozen=True)
class RunnerSubmitted:
    """sbatch returned the intended runner's job id."""

    job_id: str
    max_iter: int
    echo: bool = True


@dataclass(frozen=True)
class RunnerFound:
    """A runner whose id was never saved (a crash after sbatch), found by its name."""

    job_id: str


@dataclass(frozen=True)
class RunnerLost:
    """The intended runner was never submitted: forget the intention."""


@dataclass(frozen=True)
class SuccessorQueued:
    """A runner is queued behind the current one (lookahead, relay); its log line."""

    job_id: str
    line: str = ""
    echo: bool = True


@dataclass(frozen=True)
class SuccessorTaken:
    """The queued runner is the current one now (promoted, or this relay runner)."""


@dataclass(frozen=True)
class SuccessorForgotten:
    """The queued runner will not run as the chain's (it steps aside): forget it."""


@dataclass(frozen=True)
class SuccessorDropped:
    """The chain does not go on from here: cancel the queued runner, forget it."""

    echo: bool = True


@dataclass(frozen=True)
class RelayBroken:
    """A relay runner could not queue its successor: the chain stalls after it."""

    why: str


@dataclass(frozen=True)
class RelayTookOver:
    """A relay runner is the chain's current one and runs the app."""

    job_id: str
    seq: int | None  # its runner number (None: its name has none)


@dataclass(frozen=True)
class Judged:
    """The current runner's outcome was decided; what the decision keeps.
    ``margin`` (margin, worst stop-to-exit, worst start-up) and ``reason``
    are None when they do not change; ``blamed``: the nodes it strikes."""

    iteration: int
    no_progress: int
    retries_used: int
    job_id: str = field(kw_only=True)  # the runner judged: the chain's current one, or the event is refused
    margin: tuple[int, float, float] | None = None
    reason: str | None = None
    blamed: tuple[str, ...] = ()  # nodes the runner's failure or stall is put on (core.exclusion)
    exclude_after: int = EXCLUDE_AFTER  # strikes that exclude a node (0: never)
    reason_kind: ReasonKind | None = None  # what ``reason`` says, for code to read (``core.reasons``)


@dataclass(frozen=True)
class CancelledUnjudged:
    """``chain cancel`` (or a scancelled relay) found a runner nobody judged."""


@dataclass(frozen=True)
class HookRan:
    """A hook ran (or was skipped): its result, so a restart never runs it twice."""

    entry: dict[str, Any]


@dataclass(frozen=True)
class Announced:
    """The end is about to be announced (``--notify``, mail): at most once."""


@dataclass(frozen=True)
class Ending:
    """The chain ends (hooks, announcement, then ``Ended``): its runner is
    not live any more, a queued one must not outlive it."""


@dataclass(frozen=True)
class Ended:
    """The chain has ended: its final state and reason (whoever waits sees it now)."""

    state: ChainState
    reason: str
    completed_at: float | None = None
    kind: ReasonKind | None = None  # what ``reason`` says (None: a reason no kind names)


Event = (
    Prepared
    | Resumed
    | RelayStarted
    | SubmitterQueued
    | SubmitterStarted
    | HandingOver
    | CounterRead
    | RunnerIntended
    | RunnerSubmitted
    | RunnerFound
    | RunnerLost
    | SuccessorQueued
    | SuccessorTaken
    | SuccessorForgotten
    | SuccessorDropped
    | RelayBroken
    | RelayTookOver
    | Judged
    | CancelledUnjudged
    | HookRan
    | Announced
    | Ending
    | Ended
)
