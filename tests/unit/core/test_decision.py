from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from chain.core.decision import Outcome, Policy, Step, Tally, Verdict, decide, next_step
from chain.core.model import ChainState, JobState, parse_counter
from chain.core.reasons import ReasonKind
from chain.errors import CheckpointError

POLICY = Policy(max_iter=100)


def outcome(code: int | None, before: int = 10, after: int = 20, state: JobState | None = None, **kw: Any) -> Outcome:
    return Outcome(exit_code=code, slurm_state=state, iter_before=before, iter_after=after, **kw)


def test_done_at_max_iter_completes() -> None:
    d = decide(outcome(0, 90, 100), POLICY, Tally())
    assert d.verdict is Verdict.COMPLETE


def test_an_app_that_ignored_max_iter_completes_with_the_overshoot_named() -> None:
    d = decide(outcome(0, 30, 180), POLICY, Tally())
    assert d.verdict is Verdict.COMPLETE
    assert d.reason == "app finished at 180; the counter went past MAX_ITER to 180 (the app ignored MAX_ITER)"
    assert decide(outcome(0, 90, 100), POLICY, Tally()).reason == "app finished at 100"


def test_done_below_max_iter_is_a_failure() -> None:
    d = decide(outcome(0, 10, 50), POLICY, Tally())
    assert d.verdict is Verdict.STOP and d.state is ChainState.FAILED and "50 < MAX_ITER 100" in d.reason


@pytest.mark.parametrize("code", [99, 124, 75])
def test_checkpoint_codes_continue(code: Any) -> None:
    d = decide(outcome(code), POLICY, Tally(no_progress=1))
    assert d.verdict is Verdict.CONTINUE and d.progress.no_progress == 0


@pytest.mark.parametrize("state", [JobState.TIMEOUT, JobState.PREEMPTED, JobState.NODE_FAIL])
def test_slurm_ends_with_advance_continue(state: Any) -> None:
    d = decide(outcome(None, state=state, recorded=False), POLICY, Tally())
    assert d.verdict is Verdict.CONTINUE


@pytest.mark.parametrize("recorded", [True, False])
def test_a_preempted_runner_never_counts_as_stalled_or_as_a_retry(recorded: bool) -> None:
    """PreemptMode=CANCEL ends the runner PREEMPTED; however often
    the site takes the allocation back before the app could save, the chain
    goes on from its checkpoint."""
    progress = Tally(no_progress=1, retries_used=2)
    for _ in range(3):
        d = decide(outcome(None, 20, 20, state=JobState.PREEMPTED, recorded=recorded), Policy(100, retries=2), progress)
        assert d.verdict is Verdict.CONTINUE and d.progress == progress
        assert d.reason == "runner preempted: counter 20->20"
    advanced = decide(outcome(None, 20, 25, state=JobState.PREEMPTED), POLICY, progress)
    assert advanced.progress == Tally(no_progress=0, retries_used=2)


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        ({"preempted": True, "nodes_down": ("n2",)}, "runner lost node n2 (Slurm requeued it): counter 20->20"),
        ({"requeued": True, "nodes_down": ("n1", "n3")}, "runner lost node n1,n3 (Slurm requeued it): counter 20->20"),
        ({"requeued": True}, "runner requeued by Slurm (preempted, or its node failed): counter 20->20"),
        ({"preempted": True}, "runner preempted: counter 20->20"),
        # ended PREEMPTED (PreemptMode=CANCEL) while a node was down or drained: a preemption all the same
        ({"slurm_state": JobState.PREEMPTED, "nodes_down": ("n2",)}, "runner preempted (node n2 down): counter 20->20"),
    ],
)
def test_a_runner_taken_back_says_whether_it_lost_a_node(facts: dict[str, object], reason: str) -> None:
    """Slurm answers a node failure with a requeue, as a preemption: a node of the runner's shown
    down names the loss; either way the chain goes on, nothing counted against it."""
    base = Outcome(exit_code=None, slurm_state=None, iter_before=20, iter_after=20)
    d = decide(replace(base, **facts), POLICY, Tally(no_progress=1))  # type: ignore[arg-type]
    assert (d.verdict, d.reason, d.progress) == (Verdict.CONTINUE, reason, Tally(no_progress=1))


def test_two_runners_without_advance_stop() -> None:
    first = decide(outcome(99, 20, 20), POLICY, Tally())
    assert first.verdict is Verdict.CONTINUE and first.progress.no_progress == 1
    second = decide(outcome(99, 20, 20), POLICY, first.progress)
    assert second.verdict is Verdict.STOP and second.state is ChainState.STOPPED
    assert "no progress" in second.reason


def test_deadline_without_advance_is_failure() -> None:
    d = decide(outcome(1, 20, 20, state=JobState.FAILED), POLICY, Tally())
    assert d.verdict is Verdict.STOP and d.state is ChainState.FAILED
    assert d.reason == "the app was stopped at the deadline but the counter did not advance (20->20)"


def test_app_failure_stops_with_exit_code() -> None:
    d = decide(outcome(3, detail="app exited 3"), POLICY, Tally())
    assert d.verdict is Verdict.STOP and d.state is ChainState.FAILED and "exit code 3" in d.reason


def test_user_cancel_stops_cancelled() -> None:
    d = decide(outcome(99, state=JobState.CANCELLED), POLICY, Tally())
    assert d.verdict is Verdict.STOP and d.state is ChainState.CANCELLED and "user" in d.reason


def test_chain_cancel_continues() -> None:
    d = decide(outcome(99, state=JobState.CANCELLED, cancelled_by_chain=True), POLICY, Tally())
    assert d.verdict is Verdict.CONTINUE


def test_out_of_memory_stops() -> None:
    d = decide(outcome(None, state=JobState.OUT_OF_MEMORY, recorded=False), POLICY, Tally())
    assert d.verdict is Verdict.STOP and "memory" in d.reason


def test_runner_died_without_record() -> None:
    d = decide(outcome(9, 20, 20, state=JobState.FAILED, recorded=False), POLICY, Tally())
    assert d.verdict is Verdict.STOP and "without a record" in d.reason


def test_retry_budget() -> None:
    policy = Policy(max_iter=100, retries=2)
    p = Tally()
    for used in (1, 2):
        d = decide(outcome(3), policy, p)
        assert d.verdict is Verdict.CONTINUE and d.progress.retries_used == used
        assert f"retry {used}/2" in d.reason
        p = d.progress
    assert decide(outcome(3), policy, p).verdict is Verdict.STOP


def test_next_step() -> None:
    assert next_step(10, 10) is Step.FINISH
    assert next_step(11, 10) is Step.FINISH
    assert next_step(9, 10) is Step.SUBMIT


@pytest.mark.parametrize("text, value", [("0", 0), ("42\n", 42), ("  7 ", 7)])
def test_counter_strict(text: Any, value: Any) -> None:
    assert parse_counter(text) == value


@pytest.mark.parametrize("text", ["v2 iter 10", "", "abc", "-3", "1.5", "10 20", "١٢"])
def test_counter_rejects_anything_else(text: Any) -> None:
    # the seed's tr -cd 0-9 read "v2 iter 10" as 210
    with pytest.raises(CheckpointError):
        parse_counter(text)


def test_an_app_that_exits_1_before_the_stop_signal_is_not_a_deadline_stop() -> None:
    """Runner exit 1 means "stopped at the deadline without advance" only
    when the runner sent the stop signal; otherwise the app failed on its own."""
    early = decide(
        outcome(1, 0, 0, stop_signalled=False, detail="app exited 1 after 0.4 s, before the stop signal"),
        POLICY,
        Tally(),
    )
    assert early.state is ChainState.FAILED
    assert early.reason.startswith("app exited 1 after 0.4 s, before the stop signal")
    assert "deadline" not in early.reason
    late = decide(outcome(1, 0, 0, detail="app exited 1 after SIGTERM"), POLICY, Tally())
    assert late.state is ChainState.FAILED
    assert late.reason == "the app was stopped at the deadline but the counter did not advance (0->0)"


def test_end_states_have_distinct_exit_codes() -> None:
    codes = {state: state.exit_code for state in ChainState if state.ended}
    assert codes[ChainState.COMPLETED] == 0
    others = [codes[s] for s in (ChainState.FAILED, ChainState.STOPPED, ChainState.CANCELLED)]
    assert all(c != 0 for c in others) and len(set(others)) == 3
    # never one of the ChainError codes (1-4) or the internal-error code
    assert not set(others) & {1, 2, 3, 4, 70}


# --- reasons a person reads ----------------------------------------------------
def test_a_checkpoint_without_advance_says_both_facts_and_how_far_from_the_stop() -> None:
    """Not "checkpointed (99) without checkpoint advance (0->0)": what the
    app did, what the counter did, and how many such runners the chain takes."""
    d = decide(outcome(99, 0, 0), POLICY, Tally())
    assert d.verdict is Verdict.CONTINUE and d.progress.no_progress == 1
    assert d.reason == (
        "app exited 99 (checkpointed) but the counter did not advance (0->0); "
        "runner 1 in a row without progress, the chain stops at 2"
    )
    assert decide(outcome(99, 0, 7), POLICY, Tally()).reason == "app exited 99 (checkpointed): counter 0->7"


@pytest.mark.parametrize("code, state", [(99, None), (124, None), (75, None), (None, JobState.TIMEOUT)])
def test_a_counter_that_went_back_is_called_out_and_is_no_progress(code: int | None, state: JobState | None) -> None:
    back = "the counter went back from 129 to 93 (the app started from scratch? does it resume from its checkpoint?)"
    first = decide(outcome(code, 129, 93, state=state, recorded=state is None), POLICY, Tally())
    assert first.verdict is Verdict.CONTINUE and first.progress.no_progress == 1, first
    assert f"but {back}; runner 1 in a row without progress" in first.reason
    second = decide(outcome(code, 93, 50, state=state, recorded=state is None), POLICY, first.progress)
    assert second.verdict is Verdict.STOP and second.state is ChainState.STOPPED
    assert second.reason == (
        "no progress in 2 runners in a row: the counter went back from 93 to 50 "
        "(the app started from scratch? does it resume from its checkpoint?)"
    )


def test_a_counter_that_went_back_at_the_deadline_is_called_out() -> None:
    d = decide(outcome(1, 129, 93, state=JobState.FAILED), POLICY, Tally())
    assert d.state is ChainState.FAILED and d.reason == (
        "the app was stopped at the deadline but the counter went back from 129 to 93 "
        "(the app started from scratch? does it resume from its checkpoint?)"
    )


def test_a_counter_file_never_written_is_named() -> None:
    """The runner found no CKPT_PATH after the app (``missing_counter_file``):
    the reason names the file instead of a counter that "did not advance"."""
    never = "the app never wrote its counter file state_iter.txt (CKPT_PATH)"
    deadline = decide(outcome(1, 0, 0, missing_counter_file="state_iter.txt"), POLICY, Tally())
    assert deadline.state is ChainState.FAILED
    assert deadline.reason == f"the app was stopped at the deadline but {never}"
    first = decide(outcome(99, 0, 0, missing_counter_file="state_iter.txt"), POLICY, Tally())
    assert first.verdict is Verdict.CONTINUE and first.reason.startswith(f"app exited 99 (checkpointed) but {never};")
    second = decide(outcome(99, 0, 0, missing_counter_file="state_iter.txt"), POLICY, first.progress)
    assert second.state is ChainState.STOPPED and second.reason == f"no progress in 2 runners in a row: {never}"
    done = decide(outcome(0, 0, 0, missing_counter_file="out/ckpt.txt"), POLICY, Tally())
    assert done.state is ChainState.FAILED and done.reason == (
        "app exited 0 but the app never wrote its counter file out/ckpt.txt (CKPT_PATH): the chain completes "
        "when the counter reaches MAX_ITER 100"
    )


def test_a_counter_file_that_is_gone_says_what_it_held() -> None:
    d = decide(outcome(99, 40, 0, missing_counter_file="state_iter.txt"), POLICY, Tally())
    assert "but the counter file state_iter.txt (CKPT_PATH) was gone after the app (it held 40);" in d.reason


def test_a_counter_that_stayed_keeps_its_reason_without_the_file_being_named() -> None:
    stop = decide(outcome(99, 20, 20), POLICY, Tally(no_progress=1))
    assert stop.reason == "no progress: the counter stayed at 20 for 2 runners in a row"


def test_an_app_that_exited_0_on_the_signal_is_said_to_have_stopped_on_it() -> None:
    """The runner records 124 for an app that exited 0 after chain's
    stop signal with its counter advanced; the reason says what happened, not
    'stopped at the deadline'."""
    detail = "app stopped on the signal (exit 0) after SIGTERM"
    outcome = Outcome(
        exit_code=124,
        slurm_state=JobState.COMPLETED,
        iter_before=0,
        iter_after=75,
        detail=detail,
        stopped_on_signal=True,
    )
    decision = decide(outcome, Policy(max_iter=150), Tally())
    assert decision.verdict is Verdict.CONTINUE
    assert decision.reason == "app stopped on the signal (exit 0) after SIGTERM: counter 0->75"
    assert decision.kind is ReasonKind.HANDED_OVER
    # the runner's fact decides, not its words: an account that only reads alike is not one
    worded = decide(replace(outcome, stopped_on_signal=False), Policy(max_iter=150), Tally())
    assert worded.reason == "runner stopped the app at the deadline (124): counter 0->75"
    plain = decide(
        Outcome(exit_code=124, slurm_state=None, iter_before=0, iter_after=75), Policy(max_iter=150), Tally()
    )
    assert plain.reason == "runner stopped the app at the deadline (124): counter 0->75"
