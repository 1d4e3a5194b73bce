"""On the real cluster: chains preempted by a higher-priority job
finish by themselves, with ``PreemptMode=REQUEUE`` and with ``CANCEL``, a
chain of each mode at once. The dev cluster is restarted with preemption
(``dev-cluster up --preempt MODE``: partition ``high`` preempts ``debug``);
a whole-node job in ``high`` takes every slot while the chains' runners
work. Every iteration is computed once beyond its checkpoints, no two
runners of a chain ever run at once, the preempted runner is judged
"preempted"/"requeued", never a failure or a runner without progress, and
a preempted submitter hands over by itself (no `--resume`)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import IterLog, chain_cmd, copy_example, restart_cluster, status

APP_ENV = {"ITER_SECONDS": "0.5"}
MAX_ITER = 60
MODES = ("submitter", "relay")


def _slots() -> int:
    out = subprocess.run(
        ["sinfo", "-h", "-p", "high", "-o", "%C"], capture_output=True, text=True, check=True, timeout=30
    )
    return int(out.stdout.split("/")[-1])


def _running_runners() -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-t", "RUNNING", "-o", "%j"], capture_output=True, text=True, timeout=30, check=False
    )
    return [n for n in out.stdout.split() if ".r" in n]


def _submit(work: Path, mode: str) -> str:
    work.mkdir()
    copy_example("python", work)
    out = chain_cmd(
        "submit",
        "--backend",
        "slurm",
        "--mode",
        mode,
        "--max-iter",
        str(MAX_ITER),
        "--app-cmd",
        "python3 app.py",
        "--checkpoint-every",
        "5",
        "--runner-time",
        "1:00",
        "--runner-margin",
        "10",
        "--poll-max",
        "5",
        cwd=work,
        env=APP_ENV,
    )
    return str(out.stdout.split()[1]).rstrip(":")


def _until(works: dict[str, Path], done: Any, timeout: float, what: str) -> None:
    deadline, overlaps = time.time() + timeout, []
    while time.time() < deadline:
        if all(done(status(w)) for w in works.values()):
            return
        for chain_id in works:
            mine = [n for n in _running_runners() if n.startswith(chain_id + ".r")]
            if len(mine) > 1:
                overlaps.append(mine)
        assert not overlaps, overlaps
        time.sleep(0.5)
    raise AssertionError(f"{what} after {timeout}s: {[status(w)['state'] for w in works.values()]}")


@pytest.mark.slurm
@pytest.mark.alone  # restarts the cluster with preemption; the high job would preempt every other test's jobs
@pytest.mark.parametrize("preempt", ["CANCEL", "REQUEUE"])
def test_preempted_chains_of_both_modes_complete_by_themselves(
    slurm_cluster: Any, tmp_path: Path, preempt: str
) -> None:
    restart_cluster(slurm_cluster, "--preempt", preempt)
    try:
        works = {_submit(tmp_path / mode, mode): tmp_path / mode for mode in MODES}
        _until(works, lambda s: s["iteration"] >= 5, 120, "not checkpointed")
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-p",
                "high",
                "-n",
                str(_slots()),
                "-J",
                "hog",
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 15",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        _until(works, lambda s: s["state"] in ("completed", "failed", "stopped", "cancelled"), 480, "not ended")
    finally:
        restart_cluster(slurm_cluster)
    for mode, work in zip(MODES, works.values(), strict=True):
        log = (work / ".chain" / "chain.log").read_text()
        assert status(work)["state"] == "completed", log
        runners = [json.loads(line) for line in (work / ".chain" / "runners.jsonl").read_text().splitlines()]
        taken = [r for r in runners if r["reason"].startswith(("runner preempted", "runner requeued by Slurm"))]
        assert taken and all(r["verdict"] == "continue" for r in taken), (mode, [r["reason"] for r in runners])
        IterLog.read(work / "iterations.log").check_exactly_once_beyond_checkpoints(MAX_ITER)
        if mode == "submitter":  # it handed over by itself, not waiting out a requeue hold
            assert "preempted: successor" in log and "--resume" not in log, log
