"""The chain's decision: what a runner's outcome means for the chain.

Pure: state + outcome -> next action. No I/O, no clock. The submitter feeds
it facts (the runner's own record, Slurm's final state, the counter before
and after) and carries out what it returns.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from chain.core.model import (
    CONTINUE_CODES,
    CONTINUE_STATES,
    ChainState,
    JobState,
    TextEnum,
)
from chain.core.reasons import ReasonKind
from chain.primitives.codes import RunnerExit


class Verdict(TextEnum):
    """What the chain does after a runner."""

    CONTINUE = "continue"  # submit the next runner
    COMPLETE = "complete"  # run the hooks, chain completed
    STOP = "stop"  # chain ends with ``state`` and ``reason``


@dataclass(frozen=True)
class Outcome:
    """Facts about one ended runner.

    ``exit_code`` is the runner's own exit code from its record when it wrote
    one, else Slurm's. ``slurm_state`` is Slurm's final state when the
    submitter asked (it must, when the runner was signalled from outside).
    """

    exit_code: int | None
    slurm_state: JobState | None
    iter_before: int
    iter_after: int
    recorded: bool = True  # the runner wrote its final record
    cancelled_by_chain: bool = False  # the chain's own machinery cancelled it
    detail: str = ""  # the runner's own account ("app exited 3", ...)
    # the app exited by itself once the runner sent its stop signal (its
    # account, ``detail``, then says so: the reason of a handover is that account)
    stopped_on_signal: bool = False
    # the runner sent the app its stop signal before it exited: only then does
    # runner exit 1 mean the seed's "stopped at the deadline without advance"
    stop_signalled: bool = True
    # False when the runner recorded that it left without running the app
    # (superseded: a pre-queued runner that gave up waiting to be promoted)
    app_ran: bool = True
    # CKPT_PATH as configured when the runner found no counter file after the
    # app (it reads as 0), "" when it found one: the reason then names the
    # file the app never wrote instead of a counter that "did not advance"
    missing_counter_file: str = ""
    # Slurm took the allocation back: the runner recorded that its SIGTERM was
    # preemption's, or Slurm put the job back in the queue after the runner
    # recorded its end (PreemptMode=REQUEUE, or a node failure; the chain
    # cancelled the requeued copy). The chain goes on from the checkpoint
    preempted: bool = False
    requeued: bool = False
    # the stall watchdog stopped the app: no sign of progress for this many seconds
    stalled: float | None = None
    # the runner's nodes the scheduler showed down when it was judged (asked
    # only when the exclusion rule needs it: core.exclusion.asks_node_states)
    nodes_down: tuple[str, ...] = ()

    @property
    def failed_on_node(self) -> bool:
        """The runner's end may be a node's fault: stalled, NODE_FAIL, BOOT_FAIL."""
        return self.stalled is not None or self.slurm_state in (JobState.NODE_FAIL, JobState.BOOT_FAIL)

    @property
    def taken_back(self) -> bool:
        """Slurm took the allocation back: preempted, or requeued (a node failure too)."""
        return self.preempted or self.requeued or self.slurm_state is JobState.PREEMPTED

    @property
    def advanced(self) -> bool:
        """Progress: the counter went up. One that went back (the app started
        from scratch) is no progress either."""
        return self.iter_after > self.iter_before


@dataclass(frozen=True)
class Policy:
    max_iter: int
    retries: int = 0
    max_no_progress: int = 2


@dataclass(frozen=True)
class Tally:
    """What the decision remembers between runners (the app side's training
    progress is ``chain.app.torch.Progress``, another thing)."""

    no_progress: int = 0
    retries_used: int = 0


@dataclass(frozen=True)
class Decision:
    """The chain's next step after a runner: ``reason`` for a person, ``kind`` for code."""

    verdict: Verdict
    reason: str
    progress: Tally
    state: ChainState = ChainState.RUNNING
    kind: ReasonKind = field(kw_only=True)


Rule = Callable[[Outcome, Policy, Tally], "Decision | None"]


def decide(outcome: Outcome, policy: Policy, progress: Tally) -> Decision:
    """Map a runner outcome to the chain's next step: the first rule of
    ``RULES`` that applies; a failure when none does."""
    for rule in RULES:
        decision = rule(outcome, policy, progress)
        if decision is not None:
            return decision
    return _failure(outcome, policy, progress, *_failure_reason(outcome))


def _counter(outcome: Outcome) -> str:
    return f"{outcome.iter_before}->{outcome.iter_after}"


COUNTER_CMD_LABEL = "(--counter-cmd "  # in a counter named by its spec (store.counter.counter_source)


def missing_counter(ckpt_path: str, before: int) -> str:
    """The words for a counter file that is not there after the app: never
    written (the counter was 0 before it), or gone. ``ckpt_path`` is CKPT_PATH
    as configured, or, when the counter is read from the app's own checkpoint,
    that checkpoint named with its ``--counter-cmd`` spec."""
    named = ckpt_path if COUNTER_CMD_LABEL in ckpt_path else f"{ckpt_path} (CKPT_PATH)"
    if before == 0:
        return f"the app never wrote its counter file {named}"
    return f"the counter file {named} was gone after the app (it held {before})"


def _no_advance(outcome: Outcome) -> str:
    """Why the counter shows no progress, for a person: a counter file the app
    never wrote, one that is gone, a counter that went back, one that stayed."""
    before, after, missing = outcome.iter_before, outcome.iter_after, outcome.missing_counter_file
    if missing:
        return missing_counter(missing, before)
    if after < before:
        return (
            f"the counter went back from {before} to {after} (the app started from scratch? "
            "does it resume from its checkpoint?)"
        )
    return f"the counter did not advance ({before}->{after})"


def cancelled_outside(job_id: str) -> str:
    """The reason of a relay chain whose queued or running runner job was
    cancelled by someone (``scancel``), not by ``chain cancel``."""
    return f"runner job {job_id} was cancelled outside chain (scancel)"


def _cancelled_by_user(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    if outcome.slurm_state is JobState.CANCELLED and not outcome.cancelled_by_chain:
        return Decision(
            Verdict.STOP, "runner cancelled by user", progress, ChainState.CANCELLED, kind=ReasonKind.CANCELLED_BY_USER
        )
    return None


def _never_ran(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    """A runner that recorded it left without running the app: a pre-queued
    runner that gave up waiting to be promoted (``jobs.runner``) just as the
    submitter promoted it. Nothing ran and nothing was lost: the next runner
    goes on from the same counter. Not a timeout and not a stall (no margin
    learned, no runner without progress counted)."""
    if outcome.app_ran or not outcome.recorded:
        return None
    why = outcome.detail or "not the chain's current runner"
    return Decision(
        Verdict.CONTINUE,
        f"runner left without running the app: {why} ({_counter(outcome)})",
        progress,
        kind=ReasonKind.NEVER_RAN,
    )


def _out_of_memory(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    if outcome.slurm_state is JobState.OUT_OF_MEMORY:
        why = f"runner ran out of memory (counter {_counter(outcome)})"
        return _failure(outcome, policy, progress, why, ReasonKind.OUT_OF_MEMORY)
    return None


def overshoot(counter: int, max_iter: int) -> str:
    """The note for a counter past MAX_ITER (the app ignored it: its work past
    MAX_ITER was allocated and is not the chain's); "" when it is not past."""
    if counter <= max_iter:
        return ""
    return f"; the counter went past MAX_ITER to {counter} (the app ignored MAX_ITER)"


def _done(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    if outcome.exit_code != RunnerExit.DONE or outcome.slurm_state not in (None, JobState.COMPLETED):
        return None
    if outcome.iter_after >= policy.max_iter:
        return Decision(
            Verdict.COMPLETE,
            f"app finished at {outcome.iter_after}{overshoot(outcome.iter_after, policy.max_iter)}",
            Tally(),
            kind=ReasonKind.FINISHED,
        )
    if outcome.missing_counter_file:
        why = (
            f"app exited 0 but {missing_counter(outcome.missing_counter_file, outcome.iter_before)}: "
            f"the chain completes when the counter reaches MAX_ITER {policy.max_iter}"
        )
    else:
        why = f"app exited 0 but the counter is {outcome.iter_after} < MAX_ITER {policy.max_iter}"
    return Decision(Verdict.STOP, why, progress, ChainState.FAILED, kind=ReasonKind.FINISHED_SHORT)


# how a runner Slurm took back is judged (the words; the report counts them by their kind)
PREEMPTED_REASONS = ("runner preempted", "runner requeued by Slurm", "runner lost node")


def _preempted(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    """Slurm preempted the runner (PREEMPTED), or requeued it after its end
    record: the site took the allocation back. Not the runner's failure and
    no sign of a stall: the next runner goes on from the checkpoint, and no
    retry or runner without progress is counted. Slurm answers a
    node failure with a requeue too: with one of its nodes down, the runner
    lost that node, and says so."""
    if not outcome.taken_back:
        return None
    down = ",".join(outcome.nodes_down)
    kind = ReasonKind.PREEMPTED
    if outcome.slurm_state is JobState.PREEMPTED:  # ended PREEMPTED (PreemptMode=CANCEL): no node failure does that
        what = f"{PREEMPTED_REASONS[0]} (node {down} down)" if down else PREEMPTED_REASONS[0]
    elif down:
        what, kind = f"{PREEMPTED_REASONS[2]} {down} (Slurm requeued it)", ReasonKind.LOST_NODE
    elif outcome.preempted:
        what = PREEMPTED_REASONS[0]
    else:
        what, kind = f"{PREEMPTED_REASONS[1]} (preempted, or its node failed)", ReasonKind.REQUEUED
    kept = replace(progress, no_progress=0) if outcome.advanced else progress
    return Decision(Verdict.CONTINUE, f"{what}: counter {_counter(outcome)}", kept, kind=kind)


STALLED_REASON = "app stalled"  # the words of a stalled app's judgment (its kind: ReasonKind.STALLED)


def _stalled_app(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    """The watchdog stopped an app that showed no sign of progress for
    ``--stall-timeout``: whatever its counter did before, a runner without
    progress (two in a row stop the chain), never a retry of a failure."""
    if outcome.stalled is None:
        return None
    stalled = progress.no_progress + 1
    why = f"{STALLED_REASON}: no sign of progress for {outcome.stalled:.0f} s, stopped (counter {_counter(outcome)})"
    if stalled >= policy.max_no_progress:
        return Decision(
            Verdict.STOP,
            f"{why}; {stalled} runners in a row without progress",
            replace(progress, no_progress=stalled),
            ChainState.STOPPED,
            kind=ReasonKind.STALLED,
        )
    return Decision(
        Verdict.CONTINUE,
        f"{why}; runner {stalled} in a row without progress, the chain stops at {policy.max_no_progress}",
        replace(progress, no_progress=stalled),
        kind=ReasonKind.STALLED,
    )


def _handed_over(outcome: Outcome, policy: Policy, progress: Tally) -> Decision | None:
    """A runner that ended to let the next one go on: by the contract's
    codes, by Slurm ending it (TIMEOUT, PREEMPTED, NODE_FAIL) or by the
    chain's own cancel. Two in a row without advance stop the chain."""
    state, code = outcome.slurm_state, outcome.exit_code
    if not (
        state in CONTINUE_STATES
        or (code in CONTINUE_CODES and state in (None, JobState.COMPLETED, JobState.FAILED))
        or (outcome.cancelled_by_chain and state is JobState.CANCELLED)
    ):
        return None
    why = _continue_reason(outcome)
    if outcome.advanced:
        return Decision(
            Verdict.CONTINUE,
            f"{why}: counter {_counter(outcome)}",
            replace(progress, no_progress=0),
            kind=ReasonKind.HANDED_OVER,
        )
    stalled = progress.no_progress + 1
    if stalled >= policy.max_no_progress:
        return Decision(
            Verdict.STOP,
            _stalled_reason(outcome, stalled),
            replace(progress, no_progress=stalled),
            ChainState.STOPPED,
            kind=ReasonKind.NO_PROGRESS,
        )
    return Decision(
        Verdict.CONTINUE,
        f"{why} but {_no_advance(outcome)}; runner {stalled} in a row without "
        f"progress, the chain stops at {policy.max_no_progress}",
        replace(progress, no_progress=stalled),
        kind=ReasonKind.NO_ADVANCE,
    )


def _stalled_reason(outcome: Outcome, stalled: int) -> str:
    if outcome.iter_after == outcome.iter_before and not outcome.missing_counter_file:
        return f"no progress: the counter stayed at {outcome.iter_after} for {stalled} runners in a row"
    return f"no progress in {stalled} runners in a row: {_no_advance(outcome)}"


# In order: the first that applies decides (``decide``).
RULES: tuple[Rule, ...] = (
    _cancelled_by_user,
    _never_ran,
    _out_of_memory,
    _done,
    _preempted,
    _stalled_app,
    _handed_over,
)


def _failure_reason(outcome: Outcome) -> tuple[str, ReasonKind]:
    state, code, counter = outcome.slurm_state, outcome.exit_code, _counter(outcome)
    if (
        code == RunnerExit.NO_ADVANCE
        and outcome.recorded
        and outcome.stop_signalled
        and state in (None, JobState.FAILED)
    ):
        return f"the app was stopped at the deadline but {_no_advance(outcome)}", ReasonKind.DEADLINE_NO_ADVANCE
    if not outcome.recorded:
        what = state.value if state else "ended"
        exit_code = code if code is not None else "?"
        return f"runner {what} without a record (exit {exit_code}, counter {counter})", ReasonKind.NO_RECORD
    if outcome.detail:  # the runner's own account says more than its exit code
        return f"{outcome.detail} (runner exit code {code}, counter {counter})", ReasonKind.APP_FAILED
    return f"runner failed with exit code {code} (counter {counter})", ReasonKind.APP_FAILED


def _continue_reason(outcome: Outcome) -> str:
    code, state = outcome.exit_code, outcome.slurm_state
    if code == RunnerExit.TIMEOUT_ADVANCED and outcome.stopped_on_signal and state in (None, JobState.COMPLETED):
        # the app exited by itself after chain's signal (any code, 0 too): say so, not "stopped at the deadline"
        return outcome.detail
    if state in CONTINUE_STATES and state is not None:
        return f"runner ended {state.value}"
    if state is JobState.CANCELLED:
        return "runner cancelled by the chain"
    handed_over: dict[int, str] = {
        RunnerExit.CHECKPOINTED: "app exited 99 (checkpointed)",
        RunnerExit.TIMEOUT_ADVANCED: "runner stopped the app at the deadline (124)",
        RunnerExit.TEMPFAIL: "app exited 75 (stopped on a termination warning)",
    }
    return handed_over.get(code or 0, f"runner exit {code}")


def _failure(outcome: Outcome, policy: Policy, progress: Tally, reason: str, kind: ReasonKind) -> Decision:
    """A failure stops the chain unless the retry budget allows another
    runner (a retry keeps the failure's kind: its verdict says it goes on)."""
    if progress.retries_used < policy.retries:
        used = progress.retries_used + 1
        return Decision(
            Verdict.CONTINUE,
            f"retry {used}/{policy.retries} after: {reason}",
            replace(progress, retries_used=used),
            kind=kind,
        )
    return Decision(Verdict.STOP, reason, progress, ChainState.FAILED, kind=kind)


class Step(str, enum.Enum):
    """What the submitter does when no runner is live (a live one is waited for first)."""

    FINISH = "finish"  # counter reached MAX_ITER: hooks, then completed
    SUBMIT = "submit"  # submit the next runner


def next_step(counter: int, max_iter: int) -> Step:
    if counter >= max_iter:
        return Step.FINISH
    return Step.SUBMIT
