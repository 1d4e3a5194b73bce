"""No app outlives its runner, on both backends: the
runner of an app that ignores its stop signal is SIGKILLed (a crash, the
OOM killer). On Slurm with proctrack/linuxproc (the dev cluster's) such an
app, re-parented to init, was no longer the job's and ran on; the app's
guard (chain.jobs.guard) stops it within the grace. Evidence: the app's own
process, looked up by a unique marker."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

from e2e_helpers import chain_cmd, wait_ended


def _pids(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False).stdout
    return out.split()


def test_an_app_whose_runner_was_killed_does_not_outlive_it(backend: str, tmp_path: Path) -> None:
    marker = f"61{uuid.uuid4().int % 10**6:06d}"
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "5",
        "--app-cmd",
        f"trap '' TERM INT; exec sleep {marker}",
        "--runner-time",
        "5:00",
        "--runner-margin",
        "10",
        "--poll-max",
        "10",
        cwd=tmp_path,
    )
    deadline = time.time() + 90
    while time.time() < deadline and not _pids(f"sleep {marker}"):
        time.sleep(0.3)
    assert _pids(f"sleep {marker}"), "the app never started"
    # the runner is the app's parent (its guard, a fork of it, has its command line)
    (app,) = _pids(f"sleep {marker}")
    runner = Path(f"/proc/{app}/stat").read_text().rsplit(")", 1)[1].split()[1]
    assert "chain\0_runner\0--chain-dir" in Path(f"/proc/{runner}/cmdline").read_text(), runner
    subprocess.run(["kill", "-KILL", runner], check=True)
    killed_at = time.time()
    while time.time() < killed_at + 40 and _pids(f"sleep {marker}"):
        time.sleep(0.5)
    assert not _pids(f"sleep {marker}"), "the app outlived its killed runner"
    assert time.time() - killed_at >= 5, "the app was killed before its grace: the guard did not wait"
    chain_cmd("cancel", cwd=tmp_path, timeout=120)
    assert wait_ended(tmp_path, timeout=60)["state"] in ("cancelled", "failed")
