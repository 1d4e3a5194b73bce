"""The report says which runners Slurm took back (preempted, or requeued
after a lost node): by their judgment's words (``core.decision.PREEMPTED_REASONS``), not as failures."""

from __future__ import annotations

from chain.core.decision import Outcome, Policy, Tally, decide
from chain.core.model import JobState
from chain.reporting.metrics import preempted_runners
from chain.store.records import RunnerView


def test_the_runners_slurm_took_back_are_named_by_their_judgment() -> None:
    preempted = decide(Outcome(None, JobState.PREEMPTED, 5, 5), Policy(10), Tally()).reason
    requeued = decide(Outcome(124, None, 5, 9, requeued=True), Policy(10), Tally()).reason
    timed_out = decide(Outcome(None, JobState.TIMEOUT, 5, 9), Policy(10), Tally()).reason
    lost = decide(Outcome(124, None, 5, 9, requeued=True, nodes_down=("n2",)), Policy(10), Tally()).reason
    runners = [
        RunnerView(job_id="7", reason=preempted),
        RunnerView(job_id="8", reason=requeued),
        RunnerView(job_id="9", reason=timed_out),
        RunnerView(job_id="10"),
        RunnerView(job_id="11", reason=lost),
    ]
    assert preempted_runners(runners) == ["7", "8", "11"]
