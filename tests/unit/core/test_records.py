"""A runner's records (``chain.core.records``): its own record, its judged
line in runners.jsonl as earlier versions wrote it, and the view that merges
the two."""

from __future__ import annotations

import json

import pytest

from chain.core.decision import Verdict
from chain.core.model import JobState
from chain.core.reasons import ReasonKind
from chain.core.records import JudgedRunner, RunnerPhase, RunnerRecord, RunnerView, judged_runner
from chain.core.status import ChainStatus


def test_a_record_missing_a_required_field_says_so_in_words() -> None:
    """Not the constructor's TypeError ("missing 1 required positional argument")."""
    from chain.core.records import RunnerRecord
    from chain.primitives.codec import RecordError, decode

    with pytest.raises(RecordError) as raised:
        decode(RunnerRecord, {"seq": 2})
    assert str(raised.value) == "no job_id"


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
