"""The app's iteration log as the report reads it: through ``safeio``, so a
FIFO, a device or a file past ITER_LOG_CAP at its name is not read (never
waited on, never read without end); the report is still made, from the
chain's own records, with one note saying why the log was not read."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from _backends import backends
from _report_data import ITER_LOG_RESTART, write_chain

from chain.reporting import report

pytestmark = pytest.mark.timeout(20)  # a FIFO waited on fails the test, not the run

SIZE = len(ITER_LOG_RESTART.encode())


def _never(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"no scheduler command expected: {argv}")


def _report(tmp_path: Path, spoil: Callable[[Path], object]) -> dict[str, Any]:
    """The summary of a local chain whose log (3 iterations redone) ``spoil`` replaced."""
    chain = write_chain(tmp_path, backend="local", log=ITER_LOG_RESTART)
    spoil(tmp_path / "iterations.log")
    paths = report.make_report(chain, echo=True, backends=backends(_never), settle=0)
    summary: dict[str, Any] = json.loads(paths[1].read_text())
    return summary


def _replaced(make: Callable[[Path], object]) -> Callable[[Path], object]:
    def spoil(path: Path) -> None:
        path.unlink()
        make(path)

    return spoil


def test_a_regular_log_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "ITER_LOG_CAP", SIZE)  # a log of exactly the cap is read
    summary = _report(tmp_path, lambda path: None)
    assert len(summary["notes"]) == 1 and summary["notes"][0].startswith("accounting unavailable")
    assert summary["work_redone"]["source"] == "iterations.log" and summary["work_redone"]["iterations"] == 3
    assert summary["iteration_log"] == str(tmp_path / "iterations.log")


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        (_replaced(os.mkfifo), "is not a regular file but a FIFO"),
        (_replaced(lambda path: path.symlink_to("/dev/zero")), "is not a regular file but a character device"),
        (_replaced(os.mkdir), "is not a regular file but a directory"),
        (lambda path: None, f"is {SIZE} bytes, more than the {SIZE - 1} bytes chain reads of it"),
    ],
    ids=["fifo", "dev-zero", "directory", "over-cap"],
)
def test_a_log_not_read_is_said_and_the_report_made_from_the_records(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    spoil: Callable[[Path], object],
    problem: str,
) -> None:
    monkeypatch.setattr(report, "ITER_LOG_CAP", SIZE - 1)
    summary = _report(tmp_path, spoil)
    note = f"iteration log not read: {tmp_path / 'iterations.log'} {problem}; redone work from the runner records"
    assert summary["notes"][1:] == [note]
    assert "".join(note.split()) in "".join(capsys.readouterr().out.split())  # printed (wrapped at 80 columns)
    assert summary["work_redone"]["source"] == "runner records" and summary["iteration_log"] is None
    assert summary["totals"]["runners"] == 3 and (tmp_path / ".chain" / "report" / "usage.csv").is_file()
