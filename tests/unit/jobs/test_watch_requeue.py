"""A runner job that Slurm requeued after it recorded its end (node failure):
the requeued copy never runs the app again, and the submitter cancels a job
that outlives its own end record before it starts the next runner (found by
the fault suite, tests/faults)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes import FakeBackend

from chain import api
from chain.backends.base import JobState
from chain.core.decision import Policy, Tally, Verdict, decide
from chain.jobs import runner
from chain.jobs.watch import RunnerWatch
from chain.store import ChainDir, ChainStatus, write_json


def _chain(tmp_path: Path) -> tuple[ChainDir, Any]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10}, {}, None, tmp_path)
    chain.save_status(
        ChainStatus(chain_id="c-1", workdir=str(tmp_path), runner_seq=1, runner_job_id="7", runner_live=True)
    )
    return chain, settings


def test_submitter_cancels_a_runner_requeued_after_its_end_record(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path)
    backend = FakeBackend()
    backend.set_state("7", JobState.PENDING)  # requeued: queued again after recording its end
    watch = RunnerWatch(chain, backend, tmp_path / settings.ckpt_path, sleep=lambda s: None)
    gone = watch.until_gone("7")  # Slurm's state (cancelled by us) says nothing; the requeue does
    assert gone is not None and gone.state is JobState.REQUEUED
    assert backend.cancelled == ["7"]
    assert "still PENDING after recording its end" in chain.log_file.read_text()
    # the record has the exit code: only Slurm's state is asked (no sacct)
    assert backend.asked_exit_codes and not any(backend.asked_exit_codes)


def test_requeued_runner_with_an_ended_record_does_not_run_the_app(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path)
    record = {"job_id": "7", "status": "ended", "exit_code": 99, "iter_before": 0, "iter_after": 5}
    write_json(chain.record_file("7"), record)
    marker = tmp_path / "ran"
    settings = api.load_settings({"app_cmd": f"touch {marker}", "max_iter": 10}, {}, None, tmp_path)
    code = runner.run(chain, settings, FakeBackend(), job_id="7", job_name="c-1.r1", workdir=tmp_path)
    assert code == 0
    assert not marker.exists(), "the app ran a second time"
    assert chain.read_record("7") == record, "the outcome the submitter judges was overwritten"


def test_a_runner_requeued_after_its_end_record_is_judged_preempted_not_stalled(tmp_path: Path) -> None:
    """PreemptMode=REQUEUE: the runner's app saved on the signal; its job came back PENDING (a
    ~120 s BeginTime hold). The chain cancels it and goes on at once, and the runner counts
    neither as a retry nor as one without progress, even when the app had no time to save."""
    chain, settings = _chain(tmp_path)
    write_json(
        chain.record_file("7"),
        {
            "job_id": "7",
            "status": "ended",
            "exit_code": 124,
            "iter_before": 0,
            "iter_after": 0,
            "external_signal": "SIGTERM",
        },
    )
    backend = FakeBackend()
    backend.set_state("7", JobState.PENDING)
    status = chain.load_status()
    assert status is not None
    status.no_progress = 1  # one more runner without progress would stop the chain
    outcome = RunnerWatch(chain, backend, tmp_path / settings.ckpt_path, sleep=lambda s: None).outcome_of(status)
    assert outcome.requeued
    decision = decide(outcome, Policy(10), Tally(no_progress=1))
    assert decision.verdict is Verdict.CONTINUE and decision.progress == Tally(no_progress=1)
    assert decision.reason.startswith("runner requeued by Slurm (preempted, or its node failed): counter 0->0")


def test_a_runner_that_recorded_its_preemption_is_judged_preempted(tmp_path: Path) -> None:
    """Relay mode with PreemptMode=REQUEUE: the successor judges its predecessor after the requeued
    copy left; Slurm's last word (COMPLETED) says nothing, the runner's record does."""
    chain, settings = _chain(tmp_path)
    write_json(
        chain.record_file("7"),
        {
            "job_id": "7",
            "status": "ended",
            "exit_code": 124,
            "iter_before": 0,
            "iter_after": 0,
            "external_signal": "SIGTERM",
            "preempted": True,
        },
    )
    backend = FakeBackend()
    backend.set_state("7", JobState.COMPLETED)
    status = chain.load_status()
    assert status is not None
    outcome = RunnerWatch(chain, backend, tmp_path / settings.ckpt_path, sleep=lambda s: None).outcome_of(status)
    decision = decide(outcome, Policy(10), Tally(no_progress=1))
    assert decision.verdict is Verdict.CONTINUE and decision.progress == Tally(no_progress=1)
    assert decision.reason == "runner preempted: counter 0->0"


def test_a_runner_that_recorded_its_preemption_has_its_requeued_copy_cancelled_at_once(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path)
    write_json(
        chain.record_file("7"),
        {
            "job_id": "7",
            "status": "ended",
            "exit_code": 124,
            "iter_before": 0,
            "iter_after": 3,
            "external_signal": "SIGTERM",
            "preempted": True,
        },
    )
    backend = FakeBackend()
    backend.set_state("7", JobState.PENDING)  # back in the queue, held ~2 min by Slurm
    slept: list[float] = []
    status = chain.load_status()
    assert status is not None
    outcome = RunnerWatch(chain, backend, tmp_path / settings.ckpt_path, sleep=slept.append).outcome_of(status)
    assert backend.cancelled == ["7"] and outcome.preempted
    assert sum(slept) < 1.0  # not the ~50 s the handoff schedule gives a job that may still be leaving
