"""The fault driver's own bookkeeping, without a cluster: a fault that was
skipped, not proven or never reached fails the run (issue 20, item 4), and
the Slurm call log records what the clients answered."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from evidence import FaultError, NotProven, SlurmCalls
from schedule import Report, Step, execute, proven_check


def _report() -> Report:
    report = Report(seed=1, scale="bounded")
    report.check("cluster restored", True, "")
    return report


def _ok(report: Report, name: str) -> Step:
    return Step(name, name, lambda: report.fault(name, "x", "y", True, "proof"))


def test_all_proven_passes() -> None:
    report = _report()
    steps = [_ok(report, "a"), _ok(report, "b")]
    execute(steps, report, nearly_done=lambda: False)
    proven_check(steps, report)
    assert report.ok, report.text()


def test_a_skipped_fault_fails_the_run() -> None:
    report = _report()
    steps = [_ok(report, "a"), _ok(report, "b")]
    calls = iter([False, True])  # the chain is nearly done before the second
    execute(steps, report, nearly_done=lambda: next(calls))
    proven_check(steps, report)
    assert not report.ok
    assert [f["fault"] for f in report.faults if not f["ok"]] == ["b"]
    assert "skipped" in report.text()


def test_a_fault_proven_on_its_second_attempt_counts_once() -> None:
    report = _report()
    attempts = []

    def flaky() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise NotProven("the runner ended first")
        report.fault("a", "x", "y", True, "proof")

    steps = [Step("a", "a", flaky), _ok(report, "b")]
    execute(steps, report, nearly_done=lambda: False)
    proven_check(steps, report)
    assert report.ok and len(attempts) == 2, report.text()


def test_a_fault_never_proven_fails_the_run() -> None:
    report = _report()

    def never() -> None:
        raise NotProven("missed")

    steps = [Step("a", "a", never), _ok(report, "b")]
    execute(steps, report, nearly_done=lambda: False)
    proven_check(steps, report)
    assert not report.ok
    assert "never proven: missed" in report.text() and report.proven()["b"] == 1


def test_after_a_failed_fault_the_rest_count_as_not_injected() -> None:
    report = _report()

    def broken() -> None:
        raise FaultError("chain failed")

    steps = [Step("a", "a", broken), _ok(report, "b"), _ok(report, "c")]
    execute(steps, report, nearly_done=lambda: False)
    proven_check(steps, report)
    assert not report.ok
    assert sorted(f["fault"] for f in report.faults if not f["ok"]) == ["a", "b", "c"]


def test_a_fault_scheduled_twice_must_be_proven_twice() -> None:
    report = _report()
    once = [False]

    def first_only() -> None:
        if not once[0]:
            once[0] = True
            report.fault("a", "x", "y", True, "proof")

    steps = [Step("a(1)", "a", first_only), Step("a(2)", "a", first_only)]
    execute(steps, report, nearly_done=lambda: False)
    proven_check(steps, report)
    assert not report.ok and "missing {'a': 1}" in report.text()


def test_the_shim_passes_a_client_through_and_logs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "squeue").write_text("#!/bin/bash\necho \"out $*\"\necho 'err line' >&2\nexit 3\n")
    (real / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{real}{os.pathsep}{os.environ['PATH']}")
    calls = SlurmCalls(tmp_path)
    env = {**os.environ, **calls.install(), "SLURM_JOB_ID": "42"}
    proc = subprocess.run(["squeue", "-j", "7,8", "-o", "%i|%T"], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out -j 7,8 -o %i|%T\n", "err line\n")
    [call] = calls.calls()
    assert (call.rc, call.job, call.prog, call.err) == (3, "42", "squeue", "err line")
    assert call.names("8") and call.names("7") and not call.names("78")
    assert call.end >= call.start
