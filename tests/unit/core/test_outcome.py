"""chain.core.outcome: a runner's end as the decision sees it, from the
facts given (no file, no scheduler)."""

from __future__ import annotations

import pytest

from chain.backends.base import JobInfo
from chain.core.model import JobState
from chain.core.outcome import runner_outcome, slurm_exit_code
from chain.core.records import RunnerPhase, RunnerRecord
from chain.store import ChainStatus

STATUS = ChainStatus(chain_id="c", runner_seq=2, runner_job_id="102", iter_before=40)


def test_a_recorded_end_is_the_runners_own_account() -> None:
    record = RunnerRecord(
        "102",
        status=RunnerPhase.ENDED,
        exit_code=99,
        iter_before=40,
        iter_after=60,
        detail="app exited 99",
        stop_sent=5.0,
        preempted=True,
    )
    outcome = runner_outcome(STATUS, record, JobInfo("102", JobState.REQUEUED), cancelled=False, counter=7)
    assert (outcome.exit_code, outcome.iter_before, outcome.iter_after) == (99, 40, 60)  # not the counter read now
    assert outcome.recorded and outcome.stop_signalled and outcome.preempted and outcome.requeued
    assert outcome.slurm_state is None  # REQUEUED is not an end
    ended = runner_outcome(STATUS, record, JobInfo("102", JobState.COMPLETED), cancelled=True, counter=None)
    assert ended.slurm_state is JobState.COMPLETED and ended.cancelled_by_chain and not ended.requeued


def test_without_a_record_the_scheduler_and_the_counter_tell() -> None:
    killed = runner_outcome(
        STATUS,
        None,
        JobInfo("102", JobState.FAILED, exit_code=0, signal=9),
        cancelled=False,
        counter=55,
        missing_counter_file="",
    )
    assert (killed.exit_code, killed.slurm_state, killed.iter_after, killed.recorded) == (
        137,
        JobState.FAILED,
        55,
        False,
    )
    lost = runner_outcome(STATUS, None, None, cancelled=False, counter=None, missing_counter_file="ckpt.txt")
    assert lost.slurm_state is JobState.UNKNOWN and lost.exit_code is None
    assert lost.iter_after == 40 and lost.missing_counter_file == "ckpt.txt"  # unreadable: no advance
    timed_out = runner_outcome(
        STATUS, None, JobInfo("102", JobState.TIMEOUT, exit_code=0, signal=15), cancelled=False, counter=50
    )
    assert timed_out.exit_code is None  # Slurm ended it: not an exit the runner had


@pytest.mark.parametrize(
    "state, code, sig, expected",
    [
        (JobState.NODE_FAIL, 0, None, None),
        (JobState.PREEMPTED, 0, None, None),
        (JobState.BOOT_FAIL, 0, None, None),
        (JobState.DEADLINE, 0, None, None),
        (JobState.CANCELLED, 0, None, None),
        (JobState.TIMEOUT, 0, 15, None),
        (JobState.COMPLETED, 0, None, 0),
        (JobState.FAILED, 3, None, 3),
        (JobState.FAILED, 0, 9, 137),
    ],
)
def test_slurms_exit_code_counts_only_when_the_job_exited_itself(
    state: JobState, code: int, sig: int | None, expected: int | None
) -> None:
    assert slurm_exit_code(JobInfo("7", state, exit_code=code, signal=sig)) == expected
    assert slurm_exit_code(None) is None
