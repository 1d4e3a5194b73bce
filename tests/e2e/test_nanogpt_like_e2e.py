"""A training script of nanoGPT's shape
(``apps/nanogpt_like.py``: progress only in its own checkpoint, resumes only
with ``--init_from=resume``, no signal handler, non-atomic saves) runs to
MAX_ITER as a chain of several runners with no line changed, given only
``--counter-cmd`` and ``${CHAIN_RESUMING:+--init_from=resume}``; with
``--progress-pattern`` each runner records the last iteration the app
printed."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import chain_cmd, wait_ended

APP = Path(__file__).resolve().parent / "apps" / "nanogpt_like.py"
MAX_ITER = 120  # the app's own max_iters
RESUME = "${CHAIN_RESUMING:+--init_from=resume}"
ITER = re.compile(r"^iter (\d+):")


def _runners(workdir: Path) -> list[dict[str, Any]]:
    lines = (workdir / ".chain" / "runners.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _printed(workdir: Path, job_id: str) -> tuple[list[str], list[int]]:
    """The runner's log lines and the iterations the app printed in it."""
    lines = (workdir / ".chain" / "logs" / f"runner-{job_id}.out").read_text().splitlines()
    return lines, [int(m.group(1)) for line in lines if (m := ITER.match(line))]


def _run_chain(
    workdir: Path, backend: str, *extra: str, app_args: str = "", runner_time: str = "0:12"
) -> list[dict[str, Any]]:
    shutil.copy(APP, workdir / "app.py")
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        str(MAX_ITER),
        "--app-cmd",
        f"python3 app.py {app_args}{RESUME}",
        *extra,
        "--runner-time",
        runner_time,
        "--runner-margin",
        "4",
        "--poll-max",
        "5",
        cwd=workdir,
    )
    report = wait_ended(workdir, timeout=360)
    runners = _runners(workdir)
    assert report["state"] == "completed" and runners[-1]["iter_after"] == MAX_ITER, (report, runners)
    assert len(runners) >= 2, runners
    assert all(r["verdict"] == "continue" for r in runners[:-1]) and runners[-1]["verdict"] == "complete", runners
    # runner 1 started from scratch, each later one resumed from the checkpoint the app left,
    # at the iteration that checkpoint holds: every iteration computed, none skipped
    seen: set[int] = set()
    for n, runner in enumerate(runners):
        lines, iters = _printed(workdir, runner["job_id"])
        started = "Initializing a new model from scratch" if n == 0 else "Resuming training from out"
        assert started in lines, lines
        assert iters and iters[0] == runner["iter_before"], (runner, iters[:3])
        assert iters == list(range(iters[0], iters[-1] + 1)), iters
        seen.update(iters)
        assert runner.get("saved_at") is not None, runner  # the checkpoint file's mtime
    assert seen == set(range(MAX_ITER + 1))
    return runners


def _redone_in_the_apps_own_log(workdir: Path, runners: list[dict[str, Any]]) -> int:
    """Iterations the app printed more than once across the runners' logs: its own account."""
    printed = [i for runner in runners for i in _printed(workdir, runner["job_id"])[1]]
    return len(printed) - len(set(printed))


@pytest.mark.parametrize("pattern", [False, True], ids=["counter-cmd", "progress-pattern"])
def test_a_nanogpt_shaped_script_runs_unchanged_as_a_chain(backend: str, pattern: bool, tmp_path: Path) -> None:
    extra = ["--counter-cmd", "json:out/ckpt.json:iter_num"]
    if pattern:
        extra += ["--progress-pattern", r"^iter (\d+):"]
    runners = _run_chain(tmp_path, backend, *extra)
    for runner in runners:
        _, iters = _printed(tmp_path, runner["job_id"])
        if pattern:
            assert (runner["iter_first"], runner["iter_reached"]) == (iters[0], iters[-1]), (runner, iters[-3:])
        else:
            assert "iter_reached" not in runner, runner
    printed = chain_cmd("report", cwd=tmp_path).stdout
    summary = json.loads((tmp_path / ".chain" / "report" / "summary.json").read_text())
    redone, totals = summary["work_redone"], summary["totals"]
    killed = [str(r["seq"]) for r in runners[:-1]]  # no signal handler: TERM killed every runner but the last
    assert all(r["app_exit_code"] == 128 + 15 for r in runners[:-1]), runners
    if pattern:  # the report's redone work is the app's own log's
        assert redone["unknown"] == [] and redone["source"] == "runner records", redone
        assert redone["iterations"] == totals["redone_iterations"] == _redone_in_the_apps_own_log(tmp_path, runners)
        assert redone["iterations"] > 0 and totals["efficiency"] is not None
        assert f"redone {redone['iterations']} it" in printed
    else:  # nothing tells what the killed app lost: said so, and no efficiency claimed
        assert redone["unknown"] == killed and totals["redone_iterations"] is None, redone
        assert totals["efficiency"] is None and "(efficiency unknown)" in printed
        assert "redone unknown" in printed and "--progress-pattern" in printed
        assert "redone work unknown" in chain_cmd("status", cwd=tmp_path).stdout


@pytest.mark.local
@pytest.mark.heavy  # torch starts in every runner, against the runner's deadline
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_the_torch_reader_follows_a_torch_save_checkpoint(tmp_path: Path) -> None:
    """The same script saving with ``torch.save`` (``out/ckpt.pt``), read by
    the built-in ``torch:`` reader (in a subprocess, ``weights_only=True``)."""
    # 121 iterations of 0.15 s (18 s) cannot fit in one runner's 16 s of work, and torch's
    # import (2-9 s, at the first save) still leaves each runner several saves: >= 2 runners
    # however fast the machine (CI: 0.05 s iterations finished in one runner)
    _run_chain(
        tmp_path,
        "local",
        "--counter-cmd",
        "torch:out/ckpt.pt:iter_num",
        app_args="--ckpt_format=torch --iter_time=0.15 ",
        runner_time="0:20",
    )
    assert (tmp_path / "out" / "ckpt.pt").exists() and not (tmp_path / "out" / "ckpt.json").exists()
