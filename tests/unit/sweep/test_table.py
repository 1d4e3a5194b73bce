"""The status rows and the state counts, from listing rows."""

from __future__ import annotations

from chain.api.listing import ChainRow
from chain.sweep.params import Point
from chain.sweep.record import PointEntry
from chain.sweep.table import PointState, SweepStatus, point_row, state_counts


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
