"""The chain's and the jobs' states (``chain.core.model``)."""

from __future__ import annotations

from chain.core.model import JobState


def test_one_job_state_table_every_state_is_active_final_or_in_between() -> None:
    """``JobState.final`` is the one table of ended states (the report's
    accounting, chain status and the backends use it), REVOKED included."""
    in_between = {s for s in JobState if not s.active and not s.final}
    assert in_between == {JobState.UNKNOWN, JobState.SPECIAL_EXIT}
    assert not any(s.active and s.final for s in JobState)
    assert JobState.parse("REVOKED").final and JobState.parse("CANCELLED by 0").final


def test_an_end_for_good_is_final_and_never_one_slurm_may_requeue() -> None:
    for_good = {state for state in JobState if state.for_good}
    assert for_good == {s for s in JobState if s.final} - {JobState.PREEMPTED, JobState.NODE_FAIL}
    assert JobState.COMPLETED in for_good and JobState.CANCELLED in for_good
    assert not JobState.PREEMPTED.for_good and not JobState.RUNNING.for_good
