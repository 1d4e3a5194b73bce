"""chain submit --resume of an ended chain resets what the next run must redo
(found by the fault suite: the report hook of a failed run counted as the
completion's, so analytics never ran at completion after a resume)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chain import api
from chain.backends.base import JobInfo
from chain.decision import ChainState
from chain.state import ChainDir


class FakeBackend:
    name = "slurm"

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, script: Path, *, job_name: str, **_: Any) -> str:
        self.submitted.append(job_name)
        return str(100 + len(self.submitted))

    def find_by_name(self, job_name: str) -> list[str]:
        return []

    def query(self, job_ids: Any) -> dict[str, JobInfo]:
        return {}


@pytest.mark.parametrize("ended", ["failed", "stopped", "cancelled"])
def test_resume_of_ended_chain_forgets_its_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 ended: str) -> None:
    fake = FakeBackend()
    monkeypatch.setattr(api, "choose_backend", lambda requested, chain_dir: ("slurm", "test"))
    monkeypatch.setattr(api, "make_backend", lambda name, chain_dir: fake)
    flags = {"app_cmd": "true", "max_iter": 10}
    chain_dir = tmp_path / ".chain"
    api.submit(flags, {}, config=None, chain_dir=chain_dir, workdir=tmp_path)
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.state = ChainState(ended)
    status.retries_used = 2
    status.hooks = [{"name": "report", "rc": 0}]
    chain.save_status(status)

    api.submit({}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, resume=True)
    resumed = chain.load_status()
    assert resumed is not None
    assert resumed.state is ChainState.PENDING
    assert resumed.hooks == [], "the ended run's report hook must run again at completion"
    assert resumed.retries_used == 0


def test_resume_after_crashed_submitter_keeps_hooks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBackend()
    monkeypatch.setattr(api, "choose_backend", lambda requested, chain_dir: ("slurm", "test"))
    monkeypatch.setattr(api, "make_backend", lambda name, chain_dir: fake)
    chain_dir = tmp_path / ".chain"
    api.submit({"app_cmd": "true", "max_iter": 10}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path)
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.state = ChainState.RUNNING  # the submitter died mid-hooks
    status.hooks = [{"name": "report", "rc": 0}]
    chain.save_status(status)
    api.submit({}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, resume=True)
    resumed = chain.load_status()
    assert resumed is not None and [h["name"] for h in resumed.hooks] == ["report"]
