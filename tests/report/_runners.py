"""The report's literal data as the typed runners it reads (``RunnerView``)."""

from __future__ import annotations

from _report_data import RUNNERS_JSONL, records

from chain.core.records import JudgedRunner, RunnerRecord, RunnerView


def lines(text: str = RUNNERS_JSONL) -> list[JudgedRunner]:
    """The judged runners of a ``runners.jsonl`` text."""
    return [j for j in map(JudgedRunner.from_line, text.splitlines()) if j is not None]


def judged(text: str = RUNNERS_JSONL) -> list[RunnerView]:
    """The runners of a ``runners.jsonl`` text by their judgments alone (as ``chain status`` reads them)."""
    return RunnerView.window(lines(text))


def _records() -> list[RunnerRecord]:
    typed = [RunnerRecord.from_json(data) for data in records()]
    assert all(typed)
    return [r for r in typed if r is not None]


def recorded() -> list[RunnerView]:
    """The runners of ``_report_data.RECORDS`` by their own records alone."""
    return [RunnerView.merge(r.job_id, r, None) for r in _records()]


def both() -> list[RunnerView]:
    """Each runner of ``_report_data`` by its record and its judgment merged (as ``load_runners``)."""
    judgments = {j.job_id: j for j in lines()}
    return [RunnerView.merge(r.job_id, r, judgments.get(r.job_id)) for r in _records()]
