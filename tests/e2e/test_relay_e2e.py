"""Relay mode end to end, on the local backend and on Slurm: no
submitter job, each runner judges its predecessor and queues its successor.

The invariants come from evidence chain does not write: the scheduler's
queue sampled while the chain runs (never two runners running, never a
submitter job), the app's own iteration log, marker files of the hooks.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import IterLog, chain_cmd, check_completed_chain, copy_example, status, wait_ended
from waiting import wait_until

from chain.backends import make_backend

APP_ENV = {"ITER_SECONDS": "0.4"}


def _jobs(backend: str, chain_dir: Path, chain_id: str) -> list[tuple[str, str]]:
    """(name, state) of the chain's jobs the scheduler knows."""
    if backend == "slurm":
        out = subprocess.run(
            ["squeue", "-h", "--states=all", "-o", "%j|%T"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        rows = [line.split("|") for line in out.splitlines()]
        return [(n, st) for n, st in rows if n.startswith(chain_id + ".")]
    infos = make_backend("local", chain_dir).query([str(i) for i in range(1, 400)])
    return [(i.name, i.state.value) for i in infos.values() if i.name.startswith(chain_id + ".")]


def _settled(backend: str, chain_dir: Path, chain_id: str) -> dict[str, str] | None:
    """The chain's jobs by name, once none is pending, running or completing."""
    jobs = _jobs(backend, chain_dir, chain_id)
    live = [n for n, st in jobs if st in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED")]
    return None if live else dict(jobs) or {"(none)": ""}


def _jobs_ended(backend: str, workdir: Path, chain_id: str) -> dict[str, str]:
    """The chain's jobs by name and final state, once all have ended."""
    return wait_until(
        lambda: _settled(backend, workdir / ".chain", chain_id),
        60,
        interval=0.5,
        what="the chain's jobs ended",
        describe=lambda: _jobs(backend, workdir / ".chain", chain_id),
    )


def _submit(tmp_path: Path, backend: str, app_cmd: str, *extra: str, max_iter: str = "50") -> str:
    out = chain_cmd(
        "submit",
        "--mode",
        "relay",
        "--backend",
        backend,
        "--max-iter",
        max_iter,
        "--app-cmd",
        app_cmd,
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        *extra,
        cwd=tmp_path,
        env=APP_ENV,
    )
    return str(out.stdout.split()[1].rstrip(":"))


def _scancel(backend: str, tmp_path: Path, job_id: str) -> None:
    if backend == "slurm":
        subprocess.run(["scancel", job_id], check=True, timeout=30)
    else:
        make_backend("local", tmp_path / ".chain").cancel(job_id)


def _wait_app_running(tmp_path: Path) -> dict[str, Any]:
    deadline = time.time() + 90
    while time.time() < deadline:
        report: dict[str, Any] = status(tmp_path)
        if report["runner_job_id"] and (tmp_path / "iterations.log").exists():
            return report
        time.sleep(0.3)
    raise AssertionError(f"the app never started: {status(tmp_path)}")


def test_relay_chain_completes_with_no_driver_job_and_never_two_runners(backend: str, tmp_path: Path) -> None:
    """≥3 runners of a 30 s limit to MAX_ITER with no submitter job ever in
    the queue; never two runners running at once; the successor queued
    while its predecessor runs; every iteration once beyond checkpoints;
    each hook ran exactly once (its own marker)."""
    copy_example("python", tmp_path)
    (tmp_path / "plot_progress.py").write_text("open('plot_progress.ran', 'a').write('x\\n')\n")
    chain_id = _submit(
        tmp_path,
        backend,
        "python3 app.py",
        "--checkpoint-every",
        "5",
        "--hook",
        'echo "user-hook $CHAIN_STATE" >> hooks.ran',
        max_iter="120",
    )
    chain_dir = tmp_path / ".chain"
    running_twice: list[list[str]] = []
    submitters: list[str] = []
    queued_behind = running_seen = 0

    def sample() -> None:
        nonlocal queued_behind, running_seen
        jobs = _jobs(backend, chain_dir, chain_id)
        running = [n for n, st in jobs if st in ("RUNNING", "COMPLETING", "CONFIGURING")]
        running_seen += bool(running)
        if len(running) > 1:
            running_twice.append(running)
        submitters.extend(n for n, _ in jobs if ".s" in n[len(chain_id) :])
        if running and any(st == "PENDING" for _, st in jobs):
            queued_behind += 1

    report = wait_ended(tmp_path, timeout=400, sample=sample)
    check_completed_chain(report, tmp_path, 120, user_hook="user-hook completed\n")
    assert report["mode"] == "relay" and report["submitter_cycle"] == 0 and report["submitter_job_id"] == ""
    assert running_seen > 20, "the samples never saw the chain's runners"
    assert not running_twice, running_twice
    assert not submitters, f"a submitter job in relay mode: {submitters}"
    assert queued_behind > 5, "the successor was never seen queued behind a running runner"
    time.sleep(2)  # the last runner cancelled its queued successor: nothing is left
    assert [(n, st) for n, st in _jobs(backend, chain_dir, chain_id) if st in ("PENDING", "RUNNING")] == []


def test_relay_app_failure_ends_the_chain_in_that_runner(backend: str, tmp_path: Path) -> None:
    """The failing runner judges itself: failed, its queued successor
    cancelled without ever running, the report hook ran."""
    chain_id = _submit(tmp_path, backend, "echo 3 > state_iter.txt; exit 3")
    report = wait_ended(tmp_path, timeout=90)
    assert report["state"] == "failed", report
    assert "exit code 3" in report["reason"]
    assert len(report["runners"]) == 1
    assert [h["name"] for h in report["hooks"]] == ["report"]
    states = _jobs_ended(backend, tmp_path, chain_id)
    assert states.get(f"{chain_id}.r2") in (None, "CANCELLED"), states


def test_relay_last_runner_queues_no_successor_its_predecessors_pace_shows_it_needs_none(
    backend: str, tmp_path: Path
) -> None:
    """Runner 1 hands over after ~20 s of app at ~2.5 iterations a second
    (at most 50 of 52); runner 2, with a few left for its 20 s, queues no
    runner 3: the chain's jobs are its two runners, neither cancelled, and
    every iteration ran once beyond checkpoints. On Slurm only: the guess is
    the runner's own, the same on the local backend (CI time)."""
    if backend == "local":
        pytest.skip("the runner's own guess, run on Slurm (CI time)")
    copy_example("python", tmp_path)
    chain_id = _submit(tmp_path, backend, "python3 app.py", "--checkpoint-every", "5", max_iter="52")
    report = wait_ended(tmp_path, timeout=180)
    log = (tmp_path / ".chain" / "chain.log").read_text()
    assert report["state"] == "completed", log
    assert [r["verdict"] for r in report["runners"]] == ["continue", "complete"], report["runners"]
    assert "relay: runner 3 not queued" in log, log
    states = _jobs_ended(backend, tmp_path, chain_id)
    assert sorted(states) == [f"{chain_id}.r1", f"{chain_id}.r2"], states
    assert "CANCELLED" not in states.values(), states
    IterLog.read(tmp_path / "iterations.log").check_exactly_once_beyond_checkpoints(52)


SLOW_LATE_APP = """
import os, signal, sys, time

path = os.environ.get("CKPT_PATH", "state_iter.txt")
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
i = int(open(path).read()) if os.path.exists(path) else 0
while i < 40 and not stop:
    time.sleep(0.4 if i < 30 else 5.0)  # from iteration 30 on, much slower
    i += 1
    with open(path + ".tmp", "w") as f:
        f.write(f"{i}\\n")
    os.replace(path + ".tmp", path)
sys.exit(0 if i >= 40 else 99)
"""


def test_relay_runner_that_outlives_its_predecessors_pace_queues_its_successor_at_half_time(
    backend: str, tmp_path: Path
) -> None:
    """An app (as a user writes one: its own counter file, saved every
    iteration) that takes 5 s an iteration from iteration 30 on: runner 2,
    which runner 1's pace showed finishing, still runs at half its time and
    queues runner 3 then, which runs; the chain completes. On Slurm only:
    the look at half time is the runner's, the same on the local backend,
    and the run takes a minute and a half."""
    if backend == "local":
        pytest.skip("the runner's own look, run on Slurm (CI time)")
    (tmp_path / "slow_late.py").write_text(SLOW_LATE_APP)
    chain_id = _submit(tmp_path, backend, "python3 slow_late.py", max_iter="40")
    report = wait_ended(tmp_path, timeout=300)
    log = (tmp_path / ".chain" / "chain.log").read_text()
    assert report["state"] == "completed", log
    assert "relay: runner 3 not queued" in log and "queueing runner 3: runner job" in log, log
    runners = report["runners"]
    assert len(runners) >= 3 and runners[-1]["verdict"] == "complete", runners
    # queued while runner 2's app ran (at half its time), not after its end
    [queued_at] = [line[1:20] for line in log.splitlines() if "queueing runner 3: runner job" in line]
    assert time.mktime(time.strptime(queued_at, "%Y-%m-%dT%H:%M:%S")) < runners[1]["end"] - 1, (queued_at, runners)
    assert [r["iter_before"] for r in runners[1:]] == [r["iter_after"] for r in runners[:-1]]
    states = _jobs_ended(backend, tmp_path, chain_id)
    assert states[f"{chain_id}.r3"] == "COMPLETED", states


def test_relay_no_progress_and_retries_use_the_same_decision(backend: str, tmp_path: Path) -> None:
    """Two runners in a row without advance stop the chain, judged by the
    successors as the submitter would."""
    _submit(tmp_path, backend, "echo 7 > state_iter.txt; exit 99")
    report = wait_ended(tmp_path, timeout=120)
    assert report["state"] == "stopped", report
    assert "no progress" in report["reason"]
    assert [(r["iter_before"], r["iter_after"]) for r in report["runners"]] == [(0, 7), (7, 7), (7, 7)]


def test_relay_user_scancel_of_the_running_runner_cancels_the_chain(backend: str, tmp_path: Path) -> None:
    """The successor judges its scancelled predecessor from the scheduler's
    state: cancelled, without running the app."""
    copy_example("python", tmp_path)
    _submit(tmp_path, backend, "python3 app.py")
    report = _wait_app_running(tmp_path)
    cancelled_at = time.time()
    _scancel(backend, tmp_path, str(report["runner_job_id"]))
    report = wait_ended(tmp_path, timeout=90)
    assert time.time() - cancelled_at < 40, "not within seconds of the next runner's judgment"
    assert report["state"] == "cancelled", report
    assert "cancelled by user" in report["reason"]
    events = IterLog.read(tmp_path / "iterations.log").events
    assert events[-1][1] == "exit", "the app did not checkpoint on the scheduler's SIGTERM"
    assert len(IterLog.read(tmp_path / "iterations.log").starts()) == 1, "the successor ran the app"


def test_relay_user_scancel_of_the_queued_successor_cancels_the_chain(backend: str, tmp_path: Path) -> None:
    """The running runner finishes its work, finds its successor gone and
    ends the chain as cancelled itself (`chain status` only reads)."""
    copy_example("python", tmp_path)
    _submit(tmp_path, backend, "python3 app.py", max_iter="200")
    report = _wait_app_running(tmp_path)
    successor = str(report["next_job_id"])
    assert successor, report
    _scancel(backend, tmp_path, successor)
    report = wait_ended(tmp_path, timeout=90)
    assert report["state"] == "cancelled", report
    assert successor in report["reason"] and "scancel" in report["reason"]
    assert report["iteration"] > 0, "the running runner's work was lost"
    events = IterLog.read(tmp_path / "iterations.log").events
    assert events[-1][1] == "exit" and len(IterLog.read(tmp_path / "iterations.log").starts()) == 1


def test_relay_cancel_then_resume_completes(backend: str, tmp_path: Path) -> None:
    """`chain cancel` stops the runner and its queued successor; `submit
    --resume` goes on from the checkpoint in relay mode to completion."""
    copy_example("python", tmp_path)
    chain_id = _submit(tmp_path, backend, "python3 app.py")
    _wait_app_running(tmp_path)
    chain_cmd("cancel", cwd=tmp_path, timeout=120)
    report = status(tmp_path)
    assert report["state"] == "cancelled", report
    wait_until(
        lambda: _settled(backend, tmp_path / ".chain", chain_id),
        60,
        interval=0.5,
        what="the chain's jobs ended",
        describe=lambda: _jobs(backend, tmp_path / ".chain", chain_id),
    )
    at_cancel = IterLog.read(tmp_path / "iterations.log").events[-1][2]
    chain_cmd("submit", "--resume", "--max-iter", "30", cwd=tmp_path, env=APP_ENV)
    report = wait_ended(tmp_path, timeout=150)
    assert report["state"] == "completed" and report["iteration"] == 30, report
    assert report["mode"] == "relay"
    IterLog.read(tmp_path / "iterations.log").check_exactly_once_beyond_checkpoints(30)
    assert at_cancel < 30
