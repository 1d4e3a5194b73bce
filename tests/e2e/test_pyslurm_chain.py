"""A real chain through ``--backend pyslurm``: Slurm's C API through a real
pyslurm built for the dev cluster's Slurm (``bash scripts/setup --pyslurm``).

The same invariants as the command-line backend's chain test: it completes
to MAX_ITER with a self-restarting submitter, never two runners (or
submitters) of the chain at once in squeue's samples, no iteration computed
twice beyond checkpoints (the app's log), and each hook ran once (marker
files). The jobs themselves run ``chain`` with --backend pyslurm too, so the
submitter submits and watches its runners through pyslurm.

Where pyslurm does not import with the running Slurm's release these tests
skip with the reason, except under CI=true, where they fail: CI builds pyslurm.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from e2e_helpers import chain_cmd, check_completed_chain, copy_example, status, wait_ended
from waiting import wait_until

APP_ENV = {"ITER_SECONDS": "0.4"}
# Runners of 30 s of compute, a submitter that hands over after 20 s: its
# restart falls 10 s inside runner 1 however Slurm staggers their starts (a
# restart in the few seconds between two runners adopts none, which is right
# but proves nothing); 160 iterations of 0.4 s need three runners.
MAX_ITER = 160
LIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")


def _queue(chain_id: str) -> tuple[list[str], list[str]]:
    """(live runner job names, running submitter job names) of the chain in
    squeue: a successor submitter pending on its predecessor is by design."""
    out = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%j|%T"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line.startswith(chain_id + ".")]
    runners = [n for n, st in rows if ".r" in n[len(chain_id) :] and st in LIVE]
    submitters = [n for n, st in rows if ".s" in n[len(chain_id) :] and st in LIVE[1:]]
    return runners, submitters


def test_pyslurm_chain_completes_with_self_restart_and_never_two_runners(real_pyslurm: str, tmp_path: Path) -> None:
    copy_example("python", tmp_path)
    (tmp_path / "plot_progress.py").write_text(
        "open('plot_progress.ran', 'a').write('x\\n')\n"
    )  # the seed's hook convention
    out = chain_cmd(
        "submit",
        "--backend",
        "pyslurm",
        "--max-iter",
        str(MAX_ITER),
        "--app-cmd",
        "python3 app.py",
        "--checkpoint-every",
        "5",
        "--runner-time",
        "0:40",
        "--runner-margin",
        "10",
        "--submitter-time",
        "0:30",
        "--submitter-margin",
        "10",
        "--poll-max",
        "10",
        "--hook",
        "echo user-hook >> hooks.ran",
        cwd=tmp_path,
        env=APP_ENV,
    )
    chain_id = out.stdout.split()[1].rstrip(":")
    chain_dir = tmp_path / ".chain"
    overlaps: list[tuple[list[str], list[str]]] = []
    samples = 0

    def sample() -> None:
        nonlocal samples
        samples += 1
        runners, submitters = _queue(chain_id)
        if len(runners) > 1 or len(submitters) > 1:
            overlaps.append((runners, submitters))

    report = wait_ended(tmp_path, timeout=400, sample=sample)
    log = check_completed_chain(report, tmp_path, MAX_ITER)
    assert report["backend"] == "pyslurm"
    assert not overlaps, f"two runners or submitters of the chain at once: {overlaps}"
    assert samples > 20
    assert report["submitter_cycle"] >= 1, "the submitter never restarted itself"
    assert "it adopts runner job" in log, "no restart happened while a runner was live"
    # the report's accounting came from slurmdbd through pyslurm.db
    usage = (chain_dir / "report" / "usage.csv").read_text()
    assert all(r["job_id"] in usage for r in report["runners"])


def test_pyslurm_cancel_command_then_resume(real_pyslurm: str, tmp_path: Path) -> None:
    """`chain cancel` of a pyslurm chain leaves nothing of it in the queue;
    `--resume` completes it from its checkpoint."""
    copy_example("python", tmp_path)
    chain_cmd(
        "submit",
        "--backend",
        "pyslurm",
        "--max-iter",
        "50",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        "--poll-max",
        "10",
        cwd=tmp_path,
        env=APP_ENV,
    )
    deadline = time.time() + 90
    while not (tmp_path / "iterations.log").exists():
        assert time.time() < deadline, "the app never started"
        time.sleep(0.3)
    assert "cancelled" in chain_cmd("cancel", cwd=tmp_path, timeout=120).stdout
    report = status(tmp_path)
    assert report["state"] == "cancelled"
    wait_until(
        lambda: _queue(report["chain_id"]) == ([], []),
        60,
        interval=0.5,
        what="the chain's jobs gone from the queue",
        describe=lambda: _queue(report["chain_id"]),
    )
    chain_cmd("submit", "--resume", "--max-iter", "20", cwd=tmp_path, env=APP_ENV)
    final = wait_ended(tmp_path, timeout=120)
    assert final["state"] == "completed" and final["iteration"] == 20
    assert final["backend"] == "pyslurm"
