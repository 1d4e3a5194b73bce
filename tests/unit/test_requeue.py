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
from chain.jobs import runner
from chain.jobs.watch import RunnerWatch
from chain.store import ChainDir, ChainStatus, write_json_atomic


def _chain(tmp_path: Path) -> tuple[ChainDir, Any]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10}, {}, None, tmp_path)
    chain.save_status(ChainStatus(chain_id="c-1", workdir=str(tmp_path), runner_seq=1, runner_job_id="7",
                                  runner_live=True))
    return chain, settings


def test_submitter_cancels_a_runner_requeued_after_its_end_record(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path)
    backend = FakeBackend()
    backend.set_state("7", JobState.PENDING)  # requeued: queued again after recording its end
    watch = RunnerWatch(chain, backend, tmp_path / settings.ckpt_path, sleep=lambda s: None)
    assert watch.until_gone("7") is None  # Slurm's state (cancelled by us) says nothing
    assert backend.cancelled == ["7"]
    assert "still PENDING after recording its end" in chain.log_file.read_text()
    # the record has the exit code: only Slurm's state is asked (no sacct)
    assert backend.asked_exit_codes and not any(backend.asked_exit_codes)


def test_requeued_runner_with_an_ended_record_does_not_run_the_app(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path)
    record = {"job_id": "7", "status": "ended", "exit_code": 99, "iter_before": 0, "iter_after": 5}
    write_json_atomic(chain.record_file("7"), record)
    marker = tmp_path / "ran"
    settings = api.load_settings({"app_cmd": f"touch {marker}", "max_iter": 10}, {}, None, tmp_path)
    code = runner.run(chain, settings, FakeBackend(), job_id="7", job_name="c-1.r1",
                      workdir=tmp_path)
    assert code == 0
    assert not marker.exists(), "the app ran a second time"
    assert chain.read_record("7") == record, "the outcome the submitter judges was overwritten"
