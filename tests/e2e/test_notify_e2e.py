"""Notifications end to end, on the local backend and on Slurm:
each ``--notify`` command runs exactly once per end of the chain, with the
final state, across a submitter restart and across a resume, in both modes;
``--mail-user`` submits one mail job at the end, never one per handoff.

The evidence is the commands' own output files, not chain's logs.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import chain_cmd, copy_example, status, wait_ended

APP_ENV = {"ITER_SECONDS": "0.4"}
DUMP = 'echo "$CHAIN_STATE $CHAIN_ITERATION/$MAX_ITER $CHAIN_ID" >> {name}'


def _notified(tmp_path: Path, name: str, expect: int, timeout: float = 30) -> list[str]:
    """The lines a notify command wrote, once ``expect`` are there (the
    command runs just after the state is saved)."""
    path = tmp_path / name
    deadline = time.time() + timeout
    while time.time() < deadline and len(path.read_text().splitlines() if path.exists() else []) < expect:
        time.sleep(0.3)
    time.sleep(1.0)  # a second, duplicate line would come right after
    return path.read_text().splitlines() if path.exists() else []


def test_notify_runs_once_across_a_submitter_restart(backend: str, tmp_path: Path) -> None:
    copy_example("python", tmp_path)
    out = chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "120",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        "--submitter-time",
        "0:45",
        "--submitter-margin",
        "10",
        "--poll-max",
        "10",
        "--notify",
        DUMP.format(name="one.txt"),
        "--notify",
        DUMP.format(name="two.txt"),
        cwd=tmp_path,
        env=APP_ENV,
    )
    chain_id = out.stdout.split()[1].rstrip(":")
    report = wait_ended(tmp_path, timeout=300)
    assert report["state"] == "completed", report
    assert report["submitter_cycle"] >= 1, "the submitter never restarted: the case is not exercised"
    for name in ("one.txt", "two.txt"):
        assert _notified(tmp_path, name, 1) == [f"completed 120/120 {chain_id}"]


def test_relay_notify_once_for_the_cancel_and_once_for_the_completion_after_resume(
    backend: str, tmp_path: Path
) -> None:
    copy_example("python", tmp_path)
    chain_cmd(
        "submit",
        "--mode",
        "relay",
        "--backend",
        backend,
        "--max-iter",
        "25",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        "--notify",
        DUMP.format(name="ends.txt"),
        cwd=tmp_path,
        env=APP_ENV,
    )
    deadline = time.time() + 90
    while time.time() < deadline and not (tmp_path / "iterations.log").exists():
        time.sleep(0.3)
    chain_cmd("cancel", cwd=tmp_path, timeout=120)
    assert [line.split()[0] for line in _notified(tmp_path, "ends.txt", 1)] == ["cancelled"]
    chain_cmd("submit", "--resume", cwd=tmp_path, env=APP_ENV)
    report = wait_ended(tmp_path, timeout=200)
    assert report["state"] == "completed", report
    lines = _notified(tmp_path, "ends.txt", 2)
    assert [line.split()[0] for line in lines] == ["cancelled", "completed"], lines
    assert lines[1].split()[1] == "25/25"


@pytest.mark.slurm
@pytest.mark.parametrize("mode", ["submitter", "relay"])
def test_mail_user_submits_one_mail_job_at_the_end(slurm_cluster: Any, tmp_path: Path, mode: str) -> None:
    """Runners hand over several times; one job with --mail-type=END and the
    address is submitted, named for the final state."""
    out = chain_cmd(
        "submit",
        "--mode",
        mode,
        "--backend",
        "slurm",
        "--max-iter",
        "50",
        "--app-cmd",
        "n=$(cat state_iter.txt 2>/dev/null || echo 0); echo $((n + 25)) > state_iter.txt; "
        "[ $((n + 25)) -ge 50 ] && exit 0; exit 99",
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        "--poll-max",
        "10",
        "--mail-user",
        "ada@example.org",
        cwd=tmp_path,
    )
    chain_id = out.stdout.split()[1].rstrip(":")
    report = wait_ended(tmp_path, timeout=150)
    assert report["state"] == "completed" and len(report["runners"]) >= 2, report
    time.sleep(3)
    jobs = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%i|%j"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.splitlines()
    mail_jobs = [line.split("|")[0] for line in jobs if line.split("|")[1] == f"{chain_id}.completed"]
    assert len(mail_jobs) == 1, jobs
    shown = subprocess.run(
        ["scontrol", "show", "job", mail_jobs[0]], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "MailUser=ada@example.org" in shown and "MailType=END" in shown, shown
    others = [
        line
        for line in jobs
        if line.split("|")[1].startswith(chain_id)
        and not line.split("|")[1].startswith((f"{chain_id}.r", f"{chain_id}.s", f"{chain_id}.completed"))
    ]
    assert others == []
    assert status(tmp_path)["state"] == "completed"
