"""The fault driver's own bookkeeping, without a cluster: a fault that was
skipped, not proven or never reached fails the run, the
Slurm call log records what the clients answered (and which racing command
asked), its gate holds a job's sbatch, the squeue sampler's rules per mode,
and a root's cluster's running marker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evidence import FaultError, NotProven, Sampler, SlurmCalls, running_marker
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


def _real_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    """A stand-in for Slurm client NAME (the shim's "real" one) first on PATH."""
    real = tmp_path / "real"
    real.mkdir(exist_ok=True)
    (real / name).write_text(f"#!/bin/bash\n{body}\n")
    (real / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{real}{os.pathsep}{os.environ['PATH']}")


def test_the_shim_passes_a_client_through_and_logs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _real_client(tmp_path, monkeypatch, "squeue", "echo \"out $*\"\necho 'err line' >&2\nexit 3")
    calls = SlurmCalls(tmp_path)
    env = {**os.environ, **calls.install(), "SLURM_JOB_ID": "42"}
    proc = subprocess.run(
        ["squeue", "-j", "7,8", "-o", "%i|%T"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out -j 7,8 -o %i|%T\n", "err line\n")
    [call] = calls.calls()
    assert (call.rc, call.job, call.prog, call.err) == (3, "42", "squeue", "err line")
    assert call.names("8") and call.names("7") and not call.names("78")
    assert call.end >= call.start


def test_the_shim_tags_calls_and_holds_a_jobs_sbatch_at_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _real_client(tmp_path, monkeypatch, "sbatch", "echo 'Submitted batch job 9'")
    calls = SlurmCalls(tmp_path)
    env = {**os.environ, **calls.install(), "SLURM_JOB_ID": "42", "FAULT_CALLER": "race0-submit"}
    calls.gate.touch()
    proc = subprocess.Popen(["sbatch", "--job-name=c.r3", "x"], env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    # the shim's printf may not have written its line yet when the file appears
    while not (calls.held.exists() and calls.held.read_text().endswith("\n")) and time.time() < deadline:
        time.sleep(0.05)
    assert calls.held.read_text().split() == ["42", "--job-name=c.r3", "x"]
    assert proc.poll() is None and not calls.calls()  # held: not run yet
    calls.gate.unlink()
    assert proc.communicate(timeout=10)[0] == "Submitted batch job 9\n"
    [call] = calls.calls()
    assert (call.job, call.who, call.rc) == ("42", "race0-submit", 0)
    # chain calls sbatch without SLURM_*: the caller's job is its parent's
    env.pop("FAULT_CALLER")
    parent = (
        "import os, subprocess; "
        "subprocess.run(['sbatch'], env={k: v for k, v in os.environ.items() if k != 'SLURM_JOB_ID'})"
    )
    subprocess.run([sys.executable, "-c", parent], env={**env, "SLURM_JOB_ID": "77"}, timeout=30, check=True)
    assert [(c.job, c.who) for c in calls.calls()][1:] == [("77", "-")]


def _sampled(relay: bool, rows: list[tuple[str, str, str]]) -> list[str]:
    sampler = Sampler("c", relay=relay)
    sampler._judge(0.0, rows)
    violations: list[str] = sampler.violations
    return violations


def test_the_sampler_allows_relays_queued_successor_but_not_two() -> None:
    running, queued = ("1", "c.r1", "RUNNING"), ("2", "c.r2", "PENDING")
    assert not _sampled(True, [running, queued])
    assert not _sampled(True, [("1", "c.r1", "COMPLETING"), ("2", "c.r2", "RUNNING"), ("3", "c.r3", "PENDING")])
    assert not _sampled(True, [("1", "c.r1", "PENDING"), queued])  # runner 1 and 2, queued by `chain submit`
    assert _sampled(True, [running, queued, ("3", "c.r3", "PENDING")])  # two queued behind the running one
    assert _sampled(True, [running, ("2", "c.r2", "RUNNING")])  # two running
    assert _sampled(True, [running, ("5", "c.s0", "PENDING")])  # relay never has a submitter
    assert _sampled(False, [running, queued])  # submitter mode: one runner in the queue at a time
    assert not _sampled(False, [running, ("5", "c.s1", "RUNNING"), ("6", "c.s2", "PENDING")])


def test_a_roots_cluster_has_its_own_running_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAIN_DEV_CLUSTER_PORT_BASE", raising=False)
    assert running_marker() == Path("/tmp/FAULT_SUITE_RUNNING")  # what the host's benchmarks read
    monkeypatch.setenv("CHAIN_DEV_CLUSTER_PORT_BASE", "6830")
    assert running_marker() == Path("/tmp/FAULT_SUITE_RUNNING.port6830")
