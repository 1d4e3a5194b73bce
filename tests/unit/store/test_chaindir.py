"""The chain directory's records: typed decoding, the log read from its end."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.core.decision import Verdict
from chain.core.model import JobState
from chain.core.reasons import ReasonKind
from chain.core.records import JudgedRunner
from chain.errors import ChainDirError
from chain.store import ChainDir


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


# --- runners.jsonl: one typed line (JudgedRunner), written as before, old lines read ----------------


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
