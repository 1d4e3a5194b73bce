"""The hooks (``chain.effects.hooks``) and the submitter's deadline: the hooks start
only with time left in the job (else a successor submitter runs them with
its whole time), a hook that outlives the time it has is stopped with its
children and recorded as timed out, and is never run a second time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fakes import FakeBackend

from chain import api
from chain.core.model import ChainState
from chain.effects.executor import Executor
from chain.effects.hooks import run_hooks
from chain.jobs.submitter import Submitter
from chain.jobs.watch import HandOver
from chain.store import ChainDir, ChainStatus


def _chain(tmp_path: Path, **flags: object) -> tuple[ChainDir, ChainStatus]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    status = ChainStatus(chain_id="c-1", workdir=str(tmp_path), state=ChainState.RUNNING, submitter_job_id="5")
    chain.save_status(status)
    (tmp_path / "state_iter.txt").write_text("10\n")  # MAX_ITER reached: the hooks are due
    return chain, status


def test_past_its_margin_the_submitter_hands_the_hooks_to_a_successor(tmp_path: Path) -> None:
    chain, _ = _chain(tmp_path)
    marker = tmp_path / "hook.ran"
    settings = api.load_settings(
        {
            "app_cmd": "true",
            "max_iter": 10,
            "hooks": [f"touch {marker}"],
            "submitter_time": "5:00",
            "submitter_margin": "60",
        },
        {},
        None,
        tmp_path,
    )
    backend = FakeBackend()
    now = [1000.0]
    sub = Submitter(chain, settings, backend, tmp_path, "5", clock=lambda: now[0], sleep=lambda s: None)
    sub.deadline = now[0] - 1  # its margin has begun
    sub.hard_end = now[0] + 50
    status = chain.load_status()
    assert status is not None
    with pytest.raises(HandOver):  # run() submits the successor, which runs the hooks
        sub._loop(status)
    assert not marker.exists() and chain.load_status().hooks == []  # type: ignore[union-attr]


def test_a_hook_past_its_time_is_stopped_with_its_children_and_never_rerun(tmp_path: Path) -> None:
    chain, status = _chain(tmp_path)
    pidfile = tmp_path / "child.pid"
    settings = api.load_settings(
        {"app_cmd": "true", "max_iter": 10, "hooks": [f"sleep 300 & echo $! > {pidfile}; wait"]}, {}, None, tmp_path
    )
    started = time.monotonic()
    run_hooks(
        chain,
        status,
        settings,
        tmp_path,
        record=Executor(chain, FakeBackend()).recorder(status),
        timeout=2.0,
        only=("hook-1",),
    )
    assert time.monotonic() - started < 15
    entry = next(h for h in status.hooks if h["name"] == "hook-1")
    assert entry["rc"] == 124 and "timed out" in entry["error"]
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the hook's child outlived it")
    calls = len(status.hooks)
    run_hooks(
        chain,
        status,
        settings,
        tmp_path,
        record=Executor(chain, FakeBackend()).recorder(status),
        timeout=2.0,
        only=("hook-1",),
    )
    assert len(status.hooks) == calls, "a timed-out hook ran again"


def test_the_hooks_share_the_time_left_rather_than_each_getting_all_of_it(tmp_path: Path) -> None:
    """Found by the relay benchmark: three long hooks each got the whole
    remaining time, and the job was killed by its limit mid-hook."""
    chain, status = _chain(tmp_path)
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10, "hooks": ["sleep 100"] * 3}, {}, None, tmp_path)
    started = time.monotonic()
    run_hooks(
        chain,
        status,
        settings,
        tmp_path,
        record=Executor(chain, FakeBackend()).recorder(status),
        timeout=3.0,
        only=("hook-1", "hook-2", "hook-3"),
    )
    assert time.monotonic() - started < 12, "each hook was given the whole budget"
    assert [h["rc"] for h in status.hooks] == [124, 124, 124]


def test_a_relay_runner_makes_the_short_report_and_the_submitter_chain_report(tmp_path: Path) -> None:
    from chain.effects.hooks import plan_hooks

    settings = api.load_settings({"app_cmd": "true", "max_iter": 10}, {}, None, tmp_path)
    assert plan_hooks(settings, "py")[0].argv == ["py", "-m", "chain", "report", "--quiet"]
    assert plan_hooks(settings, "py", job_report=True)[0].argv == ["py", "-m", "chain.reporting.report"]
