"""A completed run's return value, written into its job's directory for the
multirun's JobReturn; anything else leaves no value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.hydra_chain_launcher._callback import RETURN_FILE, SaveReturnValue, read_return_value


def _end(tmp_path: Path, status: JobStatus, value: Any) -> None:
    config = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path)}}})
    ret = JobReturn(status=status)
    ret.return_value = value
    SaveReturnValue().on_job_end(config=config, job_return=ret)


def test_a_completed_runs_value_is_read_back(tmp_path: Path) -> None:
    _end(tmp_path, JobStatus.COMPLETED, {"loss": 0.25, "steps": [1, 2]})
    assert read_return_value(tmp_path) == {"loss": 0.25, "steps": [1, 2]}
    _end(tmp_path, JobStatus.COMPLETED, 0.5)  # a later completion (a raised max_iter) replaces it
    assert read_return_value(tmp_path) == 0.5


def test_a_failed_run_or_a_value_json_cannot_hold_leaves_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _end(tmp_path, JobStatus.FAILED, RuntimeError("boom"))
    assert not (tmp_path / RETURN_FILE).exists()
    _end(tmp_path, JobStatus.COMPLETED, object())
    assert not (tmp_path / RETURN_FILE).exists() and "not JSON" in caplog.text
    assert read_return_value(tmp_path) is None
    (tmp_path / RETURN_FILE).write_text("[1")
    assert read_return_value(tmp_path) is None
