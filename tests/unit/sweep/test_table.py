"""The status rows and the state counts, from listing rows."""

from __future__ import annotations

import pytest

from chain.api.listing import ChainRow
from chain.core.model import JobInfo, JobState
from chain.core.status import ChainStatus
from chain.sweep.params import Point
from chain.sweep.record import PointEntry
from chain.sweep.table import PointState, SweepStatus, pending_why, point_row, state_counts, waiting_on


def _row(state: str) -> ChainRow:
    return ChainRow("/d", "chain-1", "submitter", state, 5, 10, 120.0, 150.0, "why")


def test_a_row_from_its_chain_or_none() -> None:
    entry = PointEntry.of(Point.of({"lr": 0.1}))
    row = point_row(entry, _row("running"), "its submitter job has ended")
    assert (row.name, row.state, row.iteration, row.max_iter, row.stranded) == (
        "lr=0.1",
        PointState.RUNNING,
        5,
        10,
        "its submitter job has ended",
    )
    assert point_row(entry, None).state is PointState.NOT_SUBMITTED
    assert point_row(entry, _row("unreadable")).state is PointState.UNREADABLE
    assert row.to_json()["params"] == {"lr": 0.1}


def test_counts_and_ended() -> None:
    entries = [PointEntry.of(Point.of({"i": i})) for i in range(4)]
    rows = (
        point_row(entries[0], _row("completed")),
        point_row(entries[1], _row("completed")),
        point_row(entries[2], _row("failed")),
        point_row(entries[3], None),
    )
    counts = state_counts(rows)
    assert counts["completed"] == 2 and counts["failed"] == 1 and counts["not submitted"] == 1
    assert list(counts) == [s.value for s in PointState]
    assert SweepStatus("/s", rows).ended
    assert not SweepStatus("/s", (point_row(entries[0], _row("pending")),)).ended
    assert SweepStatus("/s", (point_row(entries[0], _row("pending"), "nothing of it runs"),)).ended


def _jobs(**states: tuple[JobState, str]) -> dict[str, JobInfo]:
    return {job[1:]: JobInfo(job[1:], state, reason=reason) for job, (state, reason) in states.items()}


@pytest.mark.parametrize(
    ("status", "jobs", "said"),
    [
        # submitter mode, the runner queued behind others: the runner holds the point back, not its submitter
        (
            ChainStatus(chain_id="c", submitter_job_id="7", runner_job_id="8", runner_live=True),
            _jobs(j7=(JobState.RUNNING, "None"), j8=(JobState.PENDING, "Priority")),
            "runner job 8 waits on priority (jobs ahead of it in the queue)",
        ),
        # the user's job limit holds the submitter itself
        (
            ChainStatus(chain_id="c", submitter_job_id="7"),
            _jobs(j7=(JobState.PENDING, "AssocMaxJobsLimit")),
            "submitter job 7 waits on a job limit (AssocMaxJobsLimit)",
        ),
        # relay: the runner judged, its successor not started yet
        (
            ChainStatus(chain_id="c", runner_job_id="8", next_job_id="9"),
            _jobs(j9=(JobState.PENDING, "QOSMaxJobsPerUserLimit")),
            "next runner job 9 waits on a job limit (QOSMaxJobsPerUserLimit)",
        ),
        # relay: the successor queued behind a running runner is no hold-up
        (
            ChainStatus(chain_id="c", runner_job_id="8", runner_live=True, next_job_id="9"),
            _jobs(j8=(JobState.RUNNING, "None"), j9=(JobState.PENDING, "Dependency")),
            "",
        ),
        (ChainStatus(chain_id="c", runner_job_id="8", runner_live=True), {}, ""),  # the scheduler said nothing
    ],
)
def test_the_job_that_holds_a_point_back_and_on_what(status: ChainStatus, jobs: dict[str, JobInfo], said: str) -> None:
    assert waiting_on(status, jobs) == said


def test_a_pending_reason_in_words_and_a_hostile_one_shown_clean() -> None:
    assert pending_why("Resources") == "resources (the nodes it needs are busy)"
    assert pending_why("MaxJobsPerAccount") == "MaxJobsPerAccount"  # not one we know: Slurm's word
    assert pending_why("QOSGrpCpuLimit") == "a job limit (QOSGrpCpuLimit)"
    assert pending_why("Evil\x1b[2J" + "x" * 200) == "Evil[2J" + "x" * 53
    assert pending_why("") == "the scheduler"
