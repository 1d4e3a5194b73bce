"""The chain directory's records: typed decoding, the log read from its end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.core.decision import Verdict
from chain.core.model import ChainState, JobState
from chain.core.reasons import ReasonKind
from chain.core.records import JudgedRunner, RunnerPhase, RunnerRecord, RunnerView, judged_runner
from chain.errors import ChainDirError
from chain.store import ChainDir, ChainStatus, tail_lines

OK = {"chain_id": "c-1", "state": "running"}


@pytest.mark.parametrize(
    "field, value",
    [
        ("runner_seq", None),
        ("runner_seq", "3"),
        ("runner_seq", True),
        ("margin", 1.5),
        ("worst_stop_to_exit", float("nan")),
        ("runner_live", 1),
        ("hooks", [1, 2]),
        ("hooks", {"a": 1}),
        ("submitter_job_id", 41),
        ("state", "exploded"),
    ],
)
def test_every_field_is_checked_against_its_type(field: str, value: object) -> None:
    """Optional and container fields too (``int | None`` used to escape)."""
    with pytest.raises(ChainDirError, match=f"is corrupt: bad {field}"):
        ChainStatus.from_json({**OK, field: value}, Path("state.json"))


def test_a_status_round_trips_and_ignores_unknown_keys() -> None:
    status = ChainStatus(
        chain_id="c-1",
        state=ChainState.STOPPED,
        runner_seq=4,
        margin=13,
        worst_stop_to_exit=3.75,
        hooks=[{"name": "report", "rc": 0}],
    )
    data = json.loads(json.dumps({**status.to_json(), "from_a_newer_writer": 1}))
    assert ChainStatus.from_json(data, Path("s")) == status


def test_a_newer_state_format_is_refused() -> None:
    with pytest.raises(ChainDirError, match="newer than this chain understands"):
        ChainStatus.from_json({**OK, "version": 99}, Path("state.json"))
    with pytest.raises(ChainDirError, match="no chain_id"):
        ChainStatus.from_json({**OK, "chain_id": ""}, Path("state.json"))
    for hostile in ("a/b", "../x", "..", ".", "a b", "a\u2028b"):  # a path, or out of its line
        with pytest.raises(ChainDirError, match="bad chain_id"):
            ChainStatus.from_json({**OK, "chain_id": hostile}, Path("state.json"))
    assert ChainStatus.from_json({**OK, "chain_id": "run.1-0a1b2c"}, Path("state.json")).chain_id == "run.1-0a1b2c"


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
        chain.append_runner(JudgedRunner(job_id=str(i), seq=i + 1))
    with chain.runners_log.open("a") as fh:
        fh.write('{"job_id": "torn')  # a crash mid-append
    last = chain.last_runner()
    assert last is not None and last.job_id == "499"
    recent, total = chain.recent_runners(3)
    assert [r.job_id for r in recent] == ["497", "498", "499"] and total == 500


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
        with (
            pytest.raises(ChainDirError, match="is busy: another chain command"),
            chain.locked(wait=5, clock=lambda: now[0], sleep=sleep),
        ):
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
    from chain.core.records import RunnerRecord
    from chain.primitives.codec import RecordError, decode

    with pytest.raises(RecordError) as raised:
        decode(RunnerRecord, {"seq": 2})
    assert str(raised.value) == "no job_id"


# --- runners.jsonl: one typed line (JudgedRunner), written as before, old lines read ----------------


def _judge(record: RunnerRecord | None) -> str:
    status = ChainStatus(chain_id="c-1", runner_job_id="36", runner_seq=1, runner_submitted=1795938872.620649)
    entry = judged_runner(
        status,
        record,
        state=JobState.FAILED,
        exit_code=99,
        iter_before=0,
        iter_after=11,
        verdict=Verdict.CONTINUE,
        reason="app checkpointed (99) (0->11)",
        recorded=record is not None,
        kind=ReasonKind.HANDED_OVER,
    )
    return json.dumps(entry.to_json(), sort_keys=True)


def test_a_judged_line_is_written_as_earlier_versions_wrote_it() -> None:
    """Every field up to ``recorded`` (null when unknown); the lost-work facts
    only as far as the runner's record told them (``killed`` always does)."""
    record = RunnerRecord(
        "36", start=1795938875.6853447, end=1795938881.5052211, app_exit_code=99, iter_first=1, iter_reached=11
    )
    assert _judge(record) == (
        '{"app_exit_code": 99, "end": 1795938881.5052211, "exit_code": 99, "iter_after": 11, "iter_before": 0, '
        '"iter_first": 1, "iter_reached": 11, "job_id": "36", "killed": false, "kind": "handed_over", '
        '"reason": "app checkpointed (99) (0->11)", "recorded": true, "seq": 1, "start": 1795938875.6853447, '
        '"state": "FAILED", "stop_to_exit": null, "submitted": 1795938872.620649, "verdict": "continue"}'
    )
    assert _judge(None) == (
        '{"end": null, "exit_code": 99, "iter_after": 11, "iter_before": 0, "job_id": "36", "kind": "handed_over", '
        '"reason": "app checkpointed (99) (0->11)", "recorded": false, "seq": 1, "start": null, "state": "FAILED", '
        '"stop_to_exit": null, "submitted": 1795938872.620649, "verdict": "continue"}'
    )
    line = JudgedRunner.from_line(_judge(record))
    assert line is not None and json.dumps(line.to_json(), sort_keys=True) == _judge(record)


OLD_AND_BROKEN = (
    '{"job_id": "7", "seq": 1, "state": "COMPLETED", "verdict": "continue", "reason": "ok", "old_key": [1]}',
    "[1, 2]",
    '"a string"',
    '{"job_id": "8", "seq": "two", "start": 5, "end": "late", "verdict": null, "reason": 3, "killed": 1}',
    '{"job_id": 9, "iter_before": 1, "iter_after": 2.5}',
    '{"job_id": "10", "seq": 4, "sta',
)


def test_old_and_broken_lines_are_read_as_far_as_they_go(tmp_path: Path) -> None:
    """Lines of earlier versions (keys missing, unknown keys), a field of the
    wrong type (unknown, the rest kept), a number for a job id, a line that is
    no object and a torn last line (skipped)."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    chain.runners_log.write_text("\n".join(OLD_AND_BROKEN))
    runners = list(chain.iter_runners())
    assert runners == [
        JudgedRunner(
            job_id="7",
            seq=1,
            state=JobState.COMPLETED,
            verdict=Verdict.CONTINUE,
            reason="ok",
            kind=ReasonKind.UNKNOWN,  # words no rule of an earlier chain wrote
        ),
        JudgedRunner(job_id="8", start=5.0),
        JudgedRunner(job_id="9", iter_before=1),
    ]
    assert chain.last_runner() == runners[-1]
    assert chain.recent_runners(2)[0] == runners[1:]
    assert JudgedRunner.from_line("null") is None and JudgedRunner.from_json({}) == JudgedRunner()


def test_a_judgment_is_written_once(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    for job_id in ("7", "7", "8", "8"):
        chain.judge_runner(JudgedRunner(job_id=job_id, verdict=Verdict.CONTINUE))
    assert [r.job_id for r in chain.iter_runners()] == ["7", "8"]


def test_a_runner_is_its_judgment_over_its_own_record() -> None:
    record = RunnerRecord(
        "36",
        seq=1,
        host="vm",
        start=1.0,
        end=9.0,
        exit_code=124,
        killed=True,
        status=RunnerPhase.ENDED,
        superseded=False,
        stop_sent=8.0,
    )
    judged = JudgedRunner(job_id="36", seq=1, exit_code=None, start=2.0, verdict=Verdict.CONTINUE, submitted=0.5)
    merged = RunnerView.merge("36", record, judged)
    assert (merged.start, merged.end, merged.exit_code, merged.stop_sent, merged.killed) == (2.0, 9.0, 124, 8.0, True)
    assert (merged.host, merged.verdict, merged.submitted, merged.ended, merged.judged) == (
        "vm",
        "continue",
        0.5,
        True,
        True,
    )
    assert RunnerView.merge("39", None, None) == RunnerView(job_id="39")
    assert RunnerView.window([judged], record) == [
        RunnerView.merge("36", None, judged),
        RunnerView.merge("36", record, None),
    ]


def test_a_lenient_record_keeps_its_valid_fields() -> None:
    data = {"job_id": "36", "start": "soon", "end": 9.0, "status": "ended"}
    assert RunnerRecord.from_json(data) is None
    record = RunnerRecord.from_json(data, lenient=True)
    assert record is not None and (record.start, record.end, record.ended) == (None, 9.0, True)
    assert RunnerRecord.from_json({"start": 1.0}, lenient=True) is None  # no job: no record


@pytest.mark.parametrize(
    ("next_job", "job", "seq", "expected"),
    [
        ("102", "102", 2, True),  # the runner queued behind runner 1
        ("102", "102", 3, False),  # a job of that id from another cycle
        ("102", "103", 2, False),  # a stale pre-queued runner
        ("", "", 2, False),  # nothing queued
        ("102", "102", None, False),  # a job whose name carries no runner number
    ],
)
def test_the_queued_next_runner_is_named_by_id_and_number(
    next_job: str, job: str, seq: int | None, expected: bool
) -> None:
    status = ChainStatus(chain_id="c", runner_seq=1, runner_job_id="101", next_job_id=next_job)
    assert status.queued_next(job, seq) is expected
