"""The chain directory's records: typed decoding, the log read from its end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.core.model import ChainState
from chain.errors import ChainDirError
from chain.store import ChainDir, ChainStatus, tail_lines

OK = {"chain_id": "c-1", "state": "running"}


@pytest.mark.parametrize("field, value", [
    ("runner_seq", None), ("runner_seq", "3"), ("runner_seq", True), ("margin", 1.5),
    ("worst_stop_to_exit", float("nan")), ("runner_live", 1), ("hooks", [1, 2]), ("hooks", {"a": 1}),
    ("submitter_job_id", 41), ("state", "exploded"),
])
def test_every_field_is_checked_against_its_type(field: str, value: object) -> None:
    """Optional and container fields too (``int | None`` used to escape)."""
    with pytest.raises(ChainDirError, match=f"is corrupt: bad {field}"):
        ChainStatus.from_json({**OK, field: value}, Path("state.json"))


def test_a_status_round_trips_and_ignores_unknown_keys() -> None:
    status = ChainStatus(chain_id="c-1", state=ChainState.STOPPED, runner_seq=4, margin=13,
                         worst_stop_to_exit=3.75, hooks=[{"name": "report", "rc": 0}])
    data = json.loads(json.dumps({**status.to_json(), "from_a_newer_writer": 1}))
    assert ChainStatus.from_json(data, Path("s")) == status


def test_a_newer_state_format_is_refused() -> None:
    with pytest.raises(ChainDirError, match="newer than this chain understands"):
        ChainStatus.from_json({**OK, "version": 99}, Path("state.json"))
    with pytest.raises(ChainDirError, match="no chain_id"):
        ChainStatus.from_json({**OK, "chain_id": ""}, Path("state.json"))


def test_tail_lines_reads_only_the_end(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("".join(f"line {i}\n" for i in range(10000)))
    assert tail_lines(path, 3) == ["line 9997", "line 9998", "line 9999"]
    assert tail_lines(path, 3, max_bytes=20) == ["line 9999"]  # the cut line is dropped
    assert tail_lines(tmp_path / "missing", 3) == [] and tail_lines(path, 0) == []


def test_last_runner_skips_a_torn_line_and_counts_all(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    for i in range(500):
        chain.append_runner({"job_id": str(i), "seq": i + 1})
    with chain.runners_log.open("a") as fh:
        fh.write('{"job_id": "torn')  # a crash mid-append
    last = chain.last_runner()
    assert last is not None and last["job_id"] == "499"
    recent, total = chain.recent_runners(3)
    assert [r["job_id"] for r in recent] == ["497", "498", "499"] and total == 500


def test_a_second_command_waits_for_the_lock_then_is_refused(tmp_path: Path) -> None:
    """One lock per chain directory (flock on the directory holding it: no
    lock file is left behind); a second holder waits, then gets one line."""
    import multiprocessing

    chain = ChainDir(tmp_path / "deep" / ".chain")  # not made yet: the nearest existing directory is locked
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    ready, release = multiprocessing.Event(), multiprocessing.Event()

    def hold() -> None:
        with chain.locked():
            ready.set()
            release.wait(30)

    holder = multiprocessing.Process(target=hold)
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(ChainDirError, match="is busy: another chain command"), \
                chain.locked(wait=5, clock=lambda: now[0], sleep=sleep):
            pass
        assert 5 <= now[0] < 6
    finally:
        release.set()
        holder.join(30)
    with chain.locked(wait=0):  # free again
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing left behind


def test_a_record_missing_a_required_field_says_so_in_words() -> None:
    """Not the constructor's TypeError ("missing 1 required positional argument")."""
    from chain.store.codec import RecordError, decode
    from chain.store.records import RunnerRecord

    with pytest.raises(RecordError) as raised:
        decode(RunnerRecord, {"seq": 2})
    assert str(raised.value) == "no job_id"
