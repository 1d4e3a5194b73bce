"""Reasons written before kinds: their kind from their words, once, as the
store reads them (``core.legacy``); and every reason the decision gives has
its kind beside it (``core.reasons``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.core.decision import Outcome, Policy, Tally, Verdict, decide
from chain.core.legacy import legacy_kind
from chain.core.model import ChainState, JobState
from chain.core.reasons import ReasonKind
from chain.core.records import JudgedRunner, judged_runner
from chain.store import ChainDir, ChainStatus

P = Policy(max_iter=10)
RETRY = Policy(max_iter=10, retries=2)
AGAIN = Tally(no_progress=1)

# one outcome per way each rule of the decision words its reason
OUTCOMES: tuple[tuple[Outcome, Policy, Tally, ReasonKind], ...] = (
    (Outcome(None, JobState.CANCELLED, 5, 5), P, Tally(), ReasonKind.CANCELLED_BY_USER),
    (Outcome(0, None, 5, 5, app_ran=False), P, Tally(), ReasonKind.NEVER_RAN),
    (Outcome(0, None, 5, 5, app_ran=False, detail="not promoted"), P, Tally(), ReasonKind.NEVER_RAN),
    (Outcome(None, JobState.OUT_OF_MEMORY, 5, 5), P, Tally(), ReasonKind.OUT_OF_MEMORY),
    (Outcome(None, JobState.OUT_OF_MEMORY, 5, 5), RETRY, Tally(), ReasonKind.OUT_OF_MEMORY),
    (Outcome(0, None, 5, 10), P, Tally(), ReasonKind.FINISHED),
    (Outcome(0, None, 5, 12), P, Tally(), ReasonKind.FINISHED),
    (Outcome(0, None, 5, 7), P, Tally(), ReasonKind.FINISHED_SHORT),
    (Outcome(0, None, 0, 0, missing_counter_file="ckpt"), P, Tally(), ReasonKind.FINISHED_SHORT),
    (Outcome(None, JobState.PREEMPTED, 5, 5), P, Tally(), ReasonKind.PREEMPTED),
    (Outcome(None, JobState.PREEMPTED, 5, 5, nodes_down=("n1",)), P, Tally(), ReasonKind.PREEMPTED),
    (Outcome(124, None, 5, 9, preempted=True), P, Tally(), ReasonKind.PREEMPTED),
    (Outcome(124, None, 5, 9, requeued=True), P, Tally(), ReasonKind.REQUEUED),
    (Outcome(124, None, 5, 9, requeued=True, nodes_down=("n1", "n2")), P, Tally(), ReasonKind.LOST_NODE),
    (Outcome(124, None, 5, 6, stalled=30.0), P, Tally(), ReasonKind.STALLED),
    (Outcome(124, None, 5, 6, stalled=30.0), P, AGAIN, ReasonKind.STALLED),
    (Outcome(99, None, 5, 7), P, Tally(), ReasonKind.HANDED_OVER),
    (Outcome(124, None, 5, 7), P, Tally(), ReasonKind.HANDED_OVER),
    (Outcome(75, None, 5, 7), P, Tally(), ReasonKind.HANDED_OVER),
    (Outcome(None, JobState.TIMEOUT, 5, 7), P, Tally(), ReasonKind.HANDED_OVER),
    (Outcome(None, JobState.CANCELLED, 5, 7, cancelled_by_chain=True), P, Tally(), ReasonKind.HANDED_OVER),
    (
        Outcome(124, None, 5, 7, detail="app stopped on the signal (exit 0) after SIGTERM", stopped_on_signal=True),
        P,
        Tally(),
        ReasonKind.HANDED_OVER,
    ),
    (Outcome(99, None, 5, 5), P, Tally(), ReasonKind.NO_ADVANCE),
    (Outcome(None, JobState.TIMEOUT, 5, 3), P, Tally(), ReasonKind.NO_ADVANCE),
    (Outcome(99, None, 0, 0, missing_counter_file="ckpt"), P, Tally(), ReasonKind.NO_ADVANCE),
    (Outcome(99, None, 5, 5), P, AGAIN, ReasonKind.NO_PROGRESS),
    (Outcome(99, None, 5, 3), P, AGAIN, ReasonKind.NO_PROGRESS),
    (Outcome(1, None, 5, 5), P, Tally(), ReasonKind.DEADLINE_NO_ADVANCE),
    (Outcome(1, None, 5, 5), RETRY, Tally(), ReasonKind.DEADLINE_NO_ADVANCE),
    (Outcome(137, JobState.FAILED, 5, 5, recorded=False), P, Tally(), ReasonKind.NO_RECORD),
    (Outcome(None, JobState.UNKNOWN, 5, 5, recorded=False), RETRY, Tally(), ReasonKind.NO_RECORD),
    (
        Outcome(3, None, 5, 5, detail="app exited 3 after 2.0 s, before the stop signal"),
        P,
        Tally(),
        ReasonKind.APP_FAILED,
    ),
    (Outcome(3, None, 5, 5), P, Tally(), ReasonKind.APP_FAILED),
    (Outcome(3, None, 5, 5), RETRY, Tally(), ReasonKind.APP_FAILED),
)


@pytest.mark.parametrize(("outcome", "policy", "tally", "kind"), OUTCOMES)
def test_every_reason_of_the_decision_has_its_kind_and_old_words_read_as_it(
    outcome: Outcome, policy: Policy, tally: Tally, kind: ReasonKind
) -> None:
    """The decision says the kind beside the words; the same words in a line
    written before kinds read as that kind (the decision's wording of 0.1.0)."""
    decision = decide(outcome, policy, tally)
    assert decision.kind is kind
    assert legacy_kind(decision.reason) is kind


def test_the_outcomes_cover_every_kind_the_decision_gives() -> None:
    chain_own = {ReasonKind.CANCELLED, ReasonKind.MARGIN_WARNING, ReasonKind.UNKNOWN, *SUBMITTER_OWN}
    assert {kind for *_, kind in OUTCOMES} == set(ReasonKind) - chain_own


# the submitter's own stops (not the decision's), and how 0.2.0 worded three of them
SUBMITTER_OWN = {
    ReasonKind.BAD_CHECKPOINT: "",  # the checkpoint's own error, in many words: unknown, as before
    ReasonKind.SCHEDULER_UNREACHABLE: "scheduler unreachable (sbatch: error: Socket timed out on send/recv "
    "operation); run chain submit --resume when it answers again",
    ReasonKind.HANDOVER_FAILED: "could not submit the next submitter (sbatch: error: QOSMaxSubmitJobPerUserLimit); "
    "run chain submit --resume when Slurm answers again",
    ReasonKind.CHAIN_DIR_UNWRITABLE: "cannot write the chain directory /scratch/u/run/.chain: No space left on "
    "device; run chain submit --resume when it is writable again",
}


@pytest.mark.parametrize("kind", [k for k, words in SUBMITTER_OWN.items() if words])
def test_the_submitters_own_stops_of_0_2_0_read_as_their_kind(kind: ReasonKind) -> None:
    assert legacy_kind(SUBMITTER_OWN[kind]) is kind


def test_words_no_rule_wrote_are_unknown_and_no_words_no_kind() -> None:
    assert legacy_kind("the runner did something new") is ReasonKind.UNKNOWN
    assert legacy_kind("") is None
    assert legacy_kind("cancelled by chain cancel") is ReasonKind.CANCELLED
    assert legacy_kind("margin does not fit: the app's stop took 300 s") is ReasonKind.MARGIN_WARNING


# lines as chain 0.1.0 wrote them: no kind; "" for a state Slurm was not asked
LINES_0_1_0 = {
    ReasonKind.NO_PROGRESS: '{"job_id": "31", "seq": 3, "state": "", "exit_code": 99, "iter_before": 4, '
    '"iter_after": 4, "verdict": "stop", "reason": "no progress: the counter stayed at 4 for 2 runners in a row", '
    '"start": 1795938875.6, "end": 1795938881.5, "submitted": 1795938872.6, "stop_to_exit": null, "recorded": true}',
    ReasonKind.APP_FAILED: '{"job_id": "32", "seq": 4, "state": "FAILED", "exit_code": 3, "iter_before": 4, '
    '"iter_after": 4, "verdict": "continue", "reason": "retry 1/3 after: app exited 3 after 2.0 s, before the stop '
    'signal (runner exit code 3, counter 4->4)", "start": 1.0, "end": 2.0, "submitted": 0.5, "stop_to_exit": null, '
    '"recorded": true, "app_exit_code": 3, "killed": false}',
    ReasonKind.STALLED: '{"job_id": "33", "seq": 5, "state": "COMPLETED", "exit_code": 124, "iter_before": 4, '
    '"iter_after": 5, "verdict": "continue", "reason": "app stalled: no sign of progress for 60 s, stopped (counter '
    '4->5); runner 1 in a row without progress, the chain stops at 2", "start": 1.0, "end": 2.0, "recorded": true}',
    ReasonKind.CANCELLED: '{"job_id": "34", "seq": 6, "state": "CANCELLED", "exit_code": null, "iter_before": 5, '
    '"iter_after": 5, "verdict": "stop", "reason": "cancelled by chain cancel", "recorded": false}',
}


def test_lines_of_0_1_0_read_with_their_kind_and_typed_state_and_verdict(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    chain.runners_log.write_text("\n".join(LINES_0_1_0.values()) + "\n")
    judged = list(chain.iter_runners())
    assert [j.kind for j in judged] == list(LINES_0_1_0)
    assert [j.state for j in judged] == [None, JobState.FAILED, JobState.COMPLETED, JobState.CANCELLED]
    assert [j.verdict for j in judged] == [Verdict.STOP, Verdict.CONTINUE, Verdict.CONTINUE, Verdict.STOP]
    # a line read once is written back with its kind: the words are not read again
    again = JudgedRunner.from_json(json.loads(json.dumps(judged[0].to_json())))
    assert again == judged[0] and judged[0].to_json()["kind"] == "no_progress"


def test_a_line_with_its_kind_is_read_by_its_kind_not_its_words() -> None:
    line = json.loads(LINES_0_1_0[ReasonKind.NO_PROGRESS])
    judged = JudgedRunner.from_json(dict(line, kind="lost_node"))
    assert judged is not None and judged.kind is ReasonKind.LOST_NODE


def test_a_judgment_is_stored_with_enum_values() -> None:
    status = ChainStatus(chain_id="c-1", runner_job_id="36", runner_seq=1)
    decision = decide(Outcome(124, None, 5, 9, requeued=True, nodes_down=("n2",)), P, Tally())
    entry = judged_runner(
        status,
        None,
        state=JobState.COMPLETED,
        exit_code=124,
        iter_before=5,
        iter_after=9,
        verdict=decision.verdict,
        reason=decision.reason,
        recorded=True,
        kind=decision.kind,
    )
    stored = entry.to_json()
    assert (stored["state"], stored["verdict"], stored["kind"]) == ("COMPLETED", "continue", "lost_node")


def test_a_state_json_of_0_1_0_reads_without_a_reason_kind(tmp_path: Path) -> None:
    data = {"chain_id": "c-1", "state": "failed", "reason": "runner failed with exit code 3 (counter 4->4)"}
    status = ChainStatus.from_json(data, tmp_path / "state.json")
    # read once from its words (the reader of a reason without a kind), then stored as a kind
    assert status.state is ChainState.FAILED and status.reason_kind is ReasonKind.APP_FAILED
    stored = ChainStatus.from_json(dict(data, reason_kind="app_failed"), tmp_path / "state.json")
    assert stored.reason_kind is ReasonKind.APP_FAILED and stored.to_json()["reason_kind"] == "app_failed"
