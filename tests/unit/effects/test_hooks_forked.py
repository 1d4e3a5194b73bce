"""A hook that is chain's own code (the relay runner's short report) runs in
a forked child of the job (``chain.effects.hooks._Forked``) on the terms of
an executed one: its own session, working directory, environment, umask and
log, none of the job's descriptors, bounded by its time; and is executed as
before where a fork is not safe."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from chain.core.settings import Settings
from chain.effects.appenv import app_umask
from chain.effects.hooks import _run_bounded, plan_hooks


@pytest.fixture
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest's own helper threads would make the hook runner execute argv instead
    monkeypatch.setattr(threading, "active_count", lambda: 1)


def _facts(args: list[str]) -> int:
    print(
        json.dumps(
            {
                "args": args,
                "pid": os.getpid(),
                "sid": os.getsid(0),
                "cwd": os.getcwd(),
                "env": os.environ.get("CHAIN_STATE"),
                "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
                "umask": os.umask(0),
            }
        )
    )
    return 3


@pytest.mark.usefixtures("no_threads")
def test_a_forked_hook_gets_the_terms_of_an_executed_one(tmp_path: Path) -> None:
    kept_open = os.open(tmp_path, os.O_RDONLY)  # a descriptor of the job: not the hook's
    try:
        with (tmp_path / "hook.log").open("w") as log:
            rc = _run_bounded(
                ["py", "-m", "mod", "--chain-dir", "X"], tmp_path, log, {"CHAIN_STATE": "completed"}, 10.0, main=_facts
            )
    finally:
        os.close(kept_open)
    facts = json.loads((tmp_path / "hook.log").read_text())
    assert rc == 3 and facts["args"] == ["--chain-dir", "X"]
    assert facts["pid"] != os.getpid() and facts["sid"] == facts["pid"], "not in a session of its own"
    assert facts["cwd"] == str(tmp_path) and facts["env"] == "completed"
    assert facts["umask"] == app_umask(os.environ)
    assert kept_open not in facts["fds"] and set(facts["fds"]) <= {0, 1, 2, 3}  # 3: its listing of them


@pytest.mark.usefixtures("no_threads")
def test_a_forked_hook_that_fails_or_exits_gives_its_code_and_its_traceback(tmp_path: Path) -> None:
    def fails(args: list[str]) -> int:
        raise RuntimeError("broken report")

    def exits(args: list[str]) -> int:
        sys.exit(5)

    with (tmp_path / "hook.log").open("w") as log:
        assert _run_bounded(["py", "-m", "m"], tmp_path, log, {}, 10.0, main=fails) == 1
        assert _run_bounded(["py", "-m", "m"], tmp_path, log, {}, 10.0, main=exits) == 5
    assert "RuntimeError: broken report" in (tmp_path / "hook.log").read_text()


@pytest.mark.usefixtures("no_threads")
def test_a_forked_hook_past_its_time_is_stopped(tmp_path: Path) -> None:
    def hangs(args: list[str]) -> int:
        time.sleep(300)
        return 0

    started = time.monotonic()
    with (tmp_path / "hook.log").open("w") as log:
        assert _run_bounded(["py", "-m", "m"], tmp_path, log, {}, 1.0, main=hangs) == 124
    assert time.monotonic() - started < 10


def test_beside_a_thread_the_hook_is_executed_not_forked(tmp_path: Path) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with (tmp_path / "hook.log").open("w") as log:
            rc = _run_bounded(["sh", "-c", "exit 7"], tmp_path, log, {}, 10.0, main=_facts)
    finally:
        stop.set()
        thread.join()
    assert rc == 7 and (tmp_path / "hook.log").read_text() == ""


def test_only_the_relay_runners_report_is_forked() -> None:
    settings = Settings(app_cmd="true", max_iter=1)
    assert plan_hooks(settings, "py", job_report=True)[0].main is not None
    assert plan_hooks(settings, "py")[0].main is None  # `chain report` in a submitter job: executed


def _interrupted(args: list[str]) -> int:
    raise KeyboardInterrupt


def _not_a_code(args: list[str]) -> int:
    return "done"  # type: ignore[return-value]  # a main that breaks its contract


@pytest.mark.usefixtures("no_threads")
@pytest.mark.parametrize(("main", "code"), [(_interrupted, 1), (_not_a_code, 1), (_facts, 3)])
def test_a_forked_hook_always_ends_in_its_child_never_back_in_the_runner(tmp_path: Path, main: Any, code: int) -> None:
    """Whatever the hook's code does, the child exits there: a child that
    returned into the caller would go on as a second copy of the runner."""
    parent = os.getpid()
    with (tmp_path / "hook.log").open("w") as log:
        rc = _run_bounded([sys.executable, "-m", "x"], tmp_path, log, dict(os.environ), 30.0, main=main)
    assert os.getpid() == parent  # (a child that came back would be here, and fail this test's process)
    assert rc == code
