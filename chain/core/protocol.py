"""The chain's protocol: every change of a chain's state (``state.json``),
in one pure table.

``transition(status, event) -> (status, effects)``. Each rule names the
states its event is legal in (most only while the chain is pending or
running); ``transition`` refuses an event its state does not allow with a
``ProtocolError`` naming both, and applies nothing. The jobs (submitter,
relay runner) and the commands (``chain submit``, ``chain cancel``) gather
facts (a job id from sbatch, a runner's judgment, a counter read) and feed
them here as events (``chain.core.events``); the executor
(``chain.effects.executor``), the only code that saves ``state.json``,
stores the new status and carries out the effects in their order. No I/O, no clock: times come in the events.
``docs/how-it-works.md`` shows this table (``protocol_table``; a test
keeps the two alike).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from chain.core.events import (
    Announced,
    Cancel,
    CancelledUnjudged,
    CounterRead,
    Effect,
    Ended,
    Ending,
    Event,
    HandingOver,
    HookRan,
    Judged,
    Log,
    Prepared,
    RecordSubmitter,
    RecordWorker,
    RelayBroken,
    RelayStarted,
    RelayTookOver,
    Resumed,
    RunnerFound,
    RunnerIntended,
    RunnerLost,
    RunnerSubmitted,
    Save,
    SubmitterQueued,
    SubmitterStarted,
    SuccessorDropped,
    SuccessorForgotten,
    SuccessorQueued,
    SuccessorTaken,
)
from chain.core.exclusion import excluded, struck
from chain.core.model import ChainState
from chain.errors import ProtocolError

if TYPE_CHECKING:  # a record only: the protocol never reads or writes a file
    from chain.core.status import ChainStatus


Change = dict[str, Any]
Rule = Callable[["ChainStatus", Any], tuple[Change, tuple[Effect, ...]]]
Guard = Callable[["ChainStatus", Any], str]  # why the event is refused; "" when it is not
_RULES: dict[type, Rule] = {}
_LEGAL: dict[type, frozenset[ChainState]] = {}
_GUARDS: dict[type, tuple[Guard, str]] = {}  # the guard, and what it asks, for the docs' table
E = TypeVar("E")

# the states an event is legal in: a chain that has ended takes only a resume,
# the clean-up of what it left queued, and the announcement and record of its end
ACTIVE = frozenset({ChainState.PENDING, ChainState.RUNNING})
ANY = frozenset(ChainState)


def _rule(
    event: type[E], legal: frozenset[ChainState] = ACTIVE, guard: Guard | None = None, only: str = ""
) -> Callable[[Callable[[ChainStatus, E], tuple[Change, tuple[Effect, ...]]]], Rule]:
    """Register a rule: legal in ``legal`` states, and then only if ``guard``
    finds nothing against it (``only`` says what it asks, for the table)."""

    def register(fn: Callable[[ChainStatus, E], tuple[Change, tuple[Effect, ...]]]) -> Rule:
        _RULES[event] = fn
        _LEGAL[event] = legal
        if guard is not None:
            _GUARDS[event] = (guard, only)
        return fn

    return register


def is_current_runner(status: ChainStatus, job_id: str, seq: int | None) -> bool:
    """``job_id`` (runner ``seq``, when its name has one) is the chain's current
    runner: the chain goes on, its runner is live and has that number, and its
    job id is this one, or not saved yet (sbatch had not returned; the number
    is in the job's unique name). The one rule by which a runner knows it may
    run the app (never a second one)."""
    if status.state.ended or not status.runner_live:
        return False
    if seq is not None and seq != status.runner_seq:
        return False
    return status.runner_job_id in ("", job_id)


def _is_the_current_runner(s: ChainStatus, e: RelayTookOver) -> str:
    return "" if is_current_runner(s, e.job_id, e.seq) else f"job {e.job_id} is not the chain's current runner"


def _judges_the_live_runner(s: ChainStatus, e: Judged) -> str:
    # a judgment made on an older view, applied again over a newer state.json
    # (the executor's rebase), must not judge another runner, nor one twice
    if not s.runner_live:
        return f"runner job {e.job_id or '(not submitted)'} was judged already"
    if s.runner_job_id != e.job_id:
        return f"job {e.job_id or '(not submitted)'} is not the chain's current runner"
    return ""


SAVE: tuple[Effect, ...] = (Save(),)
NONE: tuple[Effect, ...] = ()


@_rule(Prepared)
def _prepared(s: ChainStatus, e: Prepared) -> tuple[Change, tuple[Effect, ...]]:
    return {"backend": e.backend, "workdir": e.workdir}, SAVE


@_rule(Resumed, ANY)
def _resumed(s: ChainStatus, e: Resumed) -> tuple[Change, tuple[Effect, ...]]:
    change: Change = {
        "submitter_cycle": s.submitter_cycle + 1,
        "state": ChainState.PENDING,
        "reason": "",
        "reason_kind": None,
        "no_progress": 0,
        "retries_used": 0,
    }
    if s.state.ended:  # a new run: its hooks run and its end is announced again
        change.update(hooks=[], end_announced=False)
    if e.reset_excluded and (s.node_strikes or s.excluded_nodes):
        return {**change, "node_strikes": {}, "excluded_nodes": []}, (
            Log(f"nodes no longer excluded: {', '.join(s.excluded_nodes) or 'none'}"),
        )
    return change, NONE


@_rule(RelayStarted)
def _relay_started(s: ChainStatus, e: RelayStarted) -> tuple[Change, tuple[Effect, ...]]:
    return {"submitter_job_id": "", "relay_broken": "", "submitter_cycle": 0}, NONE


@_rule(SubmitterQueued)
def _submitter_queued(s: ChainStatus, e: SubmitterQueued) -> tuple[Change, tuple[Effect, ...]]:
    return {"submitter_job_id": e.job_id}, (Save(), RecordSubmitter(e.job_id))


@_rule(SubmitterStarted)
def _submitter_started(s: ChainStatus, e: SubmitterStarted) -> tuple[Change, tuple[Effect, ...]]:
    return {"state": ChainState.RUNNING, "submitter_job_id": e.job_id}, SAVE


@_rule(HandingOver)
def _handing_over(s: ChainStatus, e: HandingOver) -> tuple[Change, tuple[Effect, ...]]:
    return {"submitter_cycle": s.submitter_cycle + 1}, SAVE


@_rule(CounterRead)
def _counter_read(s: ChainStatus, e: CounterRead) -> tuple[Change, tuple[Effect, ...]]:
    return {"iteration": e.counter}, NONE


@_rule(RunnerIntended)
def _runner_intended(s: ChainStatus, e: RunnerIntended) -> tuple[Change, tuple[Effect, ...]]:
    return {
        "runner_seq": s.runner_seq + 1,
        "runner_job_id": "",
        "runner_live": True,
        "iter_before": e.counter,
        "runner_submitted": e.now,
    }, SAVE


@_rule(RunnerSubmitted)
def _runner_submitted(s: ChainStatus, e: RunnerSubmitted) -> tuple[Change, tuple[Effect, ...]]:
    line = f"submitted runner {s.runner_seq}: job {e.job_id} (counter {s.iter_before}/{e.max_iter})"
    return {"runner_job_id": e.job_id}, (Save(), RecordWorker(e.job_id), Log(line, e.echo))


@_rule(RunnerFound)
def _runner_found(s: ChainStatus, e: RunnerFound) -> tuple[Change, tuple[Effect, ...]]:
    return {"runner_job_id": e.job_id}, (Save(), RecordWorker(e.job_id))


@_rule(RunnerLost)
def _runner_lost(s: ChainStatus, e: RunnerLost) -> tuple[Change, tuple[Effect, ...]]:
    return {"runner_live": False, "runner_seq": s.runner_seq - 1}, NONE


@_rule(SuccessorQueued)
def _successor_queued(s: ChainStatus, e: SuccessorQueued) -> tuple[Change, tuple[Effect, ...]]:
    return {"next_job_id": e.job_id, "relay_broken": ""}, (Save(), Log(e.line, e.echo)) if e.line else SAVE


@_rule(SuccessorTaken)
def _successor_taken(s: ChainStatus, e: SuccessorTaken) -> tuple[Change, tuple[Effect, ...]]:
    return {"next_job_id": ""}, NONE


@_rule(SuccessorForgotten)
def _successor_forgotten(s: ChainStatus, e: SuccessorForgotten) -> tuple[Change, tuple[Effect, ...]]:
    return {"next_job_id": ""}, SAVE


@_rule(SuccessorDropped, ANY)
def _successor_dropped(s: ChainStatus, e: SuccessorDropped) -> tuple[Change, tuple[Effect, ...]]:
    if not s.next_job_id:
        return {}, NONE
    # forgotten before the cancel: a crash in between leaves a runner that
    # exits at once, finding itself not the chain's current one
    return {"next_job_id": ""}, (Save(), Cancel(s.next_job_id, e.echo))


@_rule(RelayBroken)
def _relay_broken(s: ChainStatus, e: RelayBroken) -> tuple[Change, tuple[Effect, ...]]:
    return {"relay_broken": e.why}, (
        Save(),
        Log(f"relay: {e.why}; the app runs, then the chain stalls (chain submit --resume)"),
    )


@_rule(RelayTookOver, guard=_is_the_current_runner, only="the current runner only")
def _relay_took_over(s: ChainStatus, e: RelayTookOver) -> tuple[Change, tuple[Effect, ...]]:
    return {"state": ChainState.RUNNING}, SAVE


@_rule(Judged, guard=_judges_the_live_runner, only="the live current runner only")
def _judged(s: ChainStatus, e: Judged) -> tuple[Change, tuple[Effect, ...]]:
    change: Change = {
        "runner_live": False,
        "iteration": e.iteration,
        "no_progress": e.no_progress,
        "retries_used": e.retries_used,
    }
    if e.margin is not None:
        change.update(zip(("margin", "worst_stop_to_exit", "worst_startup"), e.margin, strict=True))
    if e.reason is not None:
        change.update(reason=e.reason, reason_kind=e.reason_kind)
    if not e.blamed:
        return change, SAVE
    strikes = struck(s.node_strikes, e.blamed)
    newly = [n for n in excluded(strikes, e.exclude_after) if n not in s.excluded_nodes] if e.exclude_after else []
    change.update(node_strikes=strikes, excluded_nodes=sorted([*s.excluded_nodes, *newly]))
    line = f"node(s) {', '.join(e.blamed)} blamed for runner {s.runner_seq}" + (
        f"; excluded from the chain's later runners: {', '.join(newly)}" if newly else ""
    )
    return change, (Log(line), Save())


@_rule(CancelledUnjudged, ANY)
def _cancelled_unjudged(s: ChainStatus, e: CancelledUnjudged) -> tuple[Change, tuple[Effect, ...]]:
    effects = (Log(f"cancelled the queued runner job {s.next_job_id}", echo=False),) if s.next_job_id else NONE
    return {"runner_live": False, "next_job_id": ""}, effects


@_rule(HookRan)
def _hook_ran(s: ChainStatus, e: HookRan) -> tuple[Change, tuple[Effect, ...]]:
    return {"hooks": [*s.hooks, dict(e.entry)]}, SAVE  # saved after each: a restart never runs one twice


@_rule(Announced, ANY)
def _announced(s: ChainStatus, e: Announced) -> tuple[Change, tuple[Effect, ...]]:
    return {"end_announced": True}, SAVE  # before anything runs: at most once per end


@_rule(Ending)
def _ending(s: ChainStatus, e: Ending) -> tuple[Change, tuple[Effect, ...]]:
    change, effects = _successor_dropped(s, SuccessorDropped())
    return {**change, "runner_live": False}, effects


def _not_after_a_cancel(s: ChainStatus, e: Ended) -> str:
    # a cancel is the user's word: only a resume reopens the chain (a submitter
    # stopped by that cancel, ending its own way a moment later, is refused)
    return "the chain was cancelled" if s.state is ChainState.CANCELLED and e.state is not ChainState.CANCELLED else ""


@_rule(Ended, ANY, guard=_not_after_a_cancel, only="after a cancel, only another cancel")
def _ended(s: ChainStatus, e: Ended) -> tuple[Change, tuple[Effect, ...]]:
    change: Change = {"state": e.state, "reason": e.reason, "reason_kind": e.kind, "runner_live": False}
    if e.completed_at is not None:
        change["completed_at"] = e.completed_at
    return change, SAVE


def transition(status: ChainStatus, event: Event) -> tuple[ChainStatus, tuple[Effect, ...]]:
    """The chain's state after ``event``, and what to carry out for it.
    Pure: ``status`` is not changed. An event its state does not allow
    (``legal_states``) raises ``ProtocolError`` and changes nothing."""
    try:
        rule = _RULES[type(event)]
    except KeyError:
        raise TypeError(f"not a protocol event: {event!r}") from None
    if status.state not in _LEGAL[type(event)]:
        raise ProtocolError(status.chain_id, type(event).__name__, f"the chain is {status.state.value}")
    guard, _ = _GUARDS.get(type(event), (None, ""))
    if guard is not None and (why := guard(status, event)):
        raise ProtocolError(status.chain_id, type(event).__name__, why)
    change, effects = rule(status, event)
    return replace(status, **change), effects


def legal_states(event: type) -> frozenset[ChainState]:
    """The states ``event`` is legal in."""
    return _LEGAL[event]


def _legal_text(event: type) -> str:
    states = _LEGAL[event]
    text = "any" if states == ANY else ", ".join(s.value for s in ChainState if s in states)
    return text + (f" ({_GUARDS[event][1]})" if event in _GUARDS else "")


def protocol_table() -> list[tuple[str, str, str]]:
    """(event, the states it is legal in, what it means: its docstring's first
    paragraph) for each row, in the table's order: the docs' protocol table
    is checked against it."""
    return [
        (event.__name__, _legal_text(event), " ".join((event.__doc__ or "").split("\n\n")[0].split()))
        for event in _RULES
    ]
