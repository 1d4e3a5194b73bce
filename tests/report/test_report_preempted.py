"""The report says which runners Slurm took back (preempted, or requeued
after a lost node): by their judgment's kind (``core.reasons``), not by its
words, and not as failures; lines written before kinds get theirs from their
words as they are read (``core.legacy``)."""

from __future__ import annotations

from pathlib import Path

from chain.core.decision import Outcome, Policy, Tally, decide
from chain.core.model import JobState
from chain.core.reasons import ReasonKind
from chain.core.records import RunnerView
from chain.reporting.metrics import preempted_runners
from chain.store import ChainDir


def test_the_runners_slurm_took_back_are_named_by_their_judgments_kind() -> None:
    preempted = decide(Outcome(None, JobState.PREEMPTED, 5, 5), Policy(10), Tally())
    requeued = decide(Outcome(124, None, 5, 9, requeued=True), Policy(10), Tally())
    timed_out = decide(Outcome(None, JobState.TIMEOUT, 5, 9), Policy(10), Tally())
    lost = decide(Outcome(124, None, 5, 9, requeued=True, nodes_down=("n2",)), Policy(10), Tally())
    assert (preempted.kind, requeued.kind, lost.kind) == (
        ReasonKind.PREEMPTED,
        ReasonKind.REQUEUED,
        ReasonKind.LOST_NODE,
    )
    runners = [
        RunnerView(job_id="7", reason=preempted.reason, kind=preempted.kind),
        RunnerView(job_id="8", reason=requeued.reason, kind=requeued.kind),
        RunnerView(job_id="9", reason=timed_out.reason, kind=timed_out.kind),
        RunnerView(job_id="10"),
        RunnerView(job_id="11", reason=lost.reason, kind=lost.kind),
        # the words alone count for nothing: the kind says what happened
        RunnerView(job_id="12", reason="runner preempted: counter 1->2", kind=ReasonKind.HANDED_OVER),
    ]
    assert preempted_runners(runners) == ["7", "8", "11"]


# runners.jsonl as chain 0.1.0 wrote it: no kind, the state "" when Slurm was not asked
LINES_0_1_0 = (
    (
        '{"job_id": "7", "seq": 1, "state": "PREEMPTED", "exit_code": null, "iter_before": 5, "iter_after": 5, '
        '"verdict": "continue", "reason": "runner preempted: counter 5->5", "start": 1.0, "end": 2.0, '
        '"submitted": 0.5, "stop_to_exit": null, "recorded": false}'
    ),
    (
        '{"job_id": "8", "seq": 2, "state": "", "exit_code": 124, "iter_before": 5, "iter_after": 9, '
        '"verdict": "continue", "reason": "runner requeued by Slurm (preempted, or its node failed): counter 5->9", '
        '"start": 3.0, "end": 4.0, "submitted": 2.5, "stop_to_exit": 1.0, "recorded": true}'
    ),
    (
        '{"job_id": "9", "seq": 3, "state": "TIMEOUT", "exit_code": null, "iter_before": 9, "iter_after": 12, '
        '"verdict": "continue", "reason": "runner ended TIMEOUT: counter 9->12", "start": 5.0, "end": 6.0, '
        '"submitted": 4.5, "stop_to_exit": null, "recorded": false}'
    ),
    (
        '{"job_id": "10", "seq": 4, "state": "", "exit_code": 124, "iter_before": 12, "iter_after": 14, '
        '"verdict": "continue", "reason": "runner lost node n2 (Slurm requeued it): counter 12->14", "start": 7.0, '
        '"end": 8.0, "submitted": 6.5, "stop_to_exit": 1.0, "recorded": true}'
    ),
)


def test_a_chain_of_0_1_0_reads_its_preempted_runners(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    chain.runners_log.write_text("\n".join(LINES_0_1_0) + "\n")
    judged = list(chain.iter_runners())
    assert [j.kind for j in judged] == [
        ReasonKind.PREEMPTED,
        ReasonKind.REQUEUED,
        ReasonKind.HANDED_OVER,
        ReasonKind.LOST_NODE,
    ]
    assert [j.state for j in judged] == [JobState.PREEMPTED, None, JobState.TIMEOUT, None]
    assert preempted_runners(RunnerView.window(judged)) == ["7", "8", "10"]
