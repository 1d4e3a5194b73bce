"""On the real cluster: a sweep of 2.5 x the cluster's job slots
in submitter mode completes. Without stepping aside, the submitters took
every slot while their runners waited PENDING (Resources) until the
submitters' own time limits; with it, a submitter whose runner waits hands
over to a successor that starts with the runner. Submitted with
``Chain.submit_many`` and waited on with ``Chain.wait_all`` (one scheduler
query per check for all chains)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import chain_cmd, restart_cluster, wait_ended
from waiting import wait_until

from chain import Chain
from chain.api.sweep import readable_status, stranded_chains
from chain.core.model import ChainState

# one runner's work: three iterations, saved, then a voluntary checkpoint (99) until MAX_ITER (0): each
# chain needs two runners, and its submitter queues the second behind every other chain's jobs
APP = (
    "i=$(cat state_iter.txt 2>/dev/null || echo 0); sleep 3; i=$((i + 3)); echo $i > state_iter.txt.tmp; "
    "mv state_iter.txt.tmp state_iter.txt; [ $i -ge $MAX_ITER ] && exit 0; exit 99"
)


def _sweep(tmp_path: Path, n: int) -> list[Chain]:
    return Chain.submit_many(
        [
            {
                "workdir": tmp_path / f"run{i:02d}",
                "app_cmd": APP,
                "max_iter": 6,
                "backend": "slurm",
                "runner_time": "2:00",
                "runner_margin": 10,
                "submitter_time": "10:00",
                "step_aside_after": 10,
                "poll_max": 10,
            }
            for i in range(n)
        ],
        parallel=4,
    )


def _check_completed(runs: list[Chain], finals: list[Any]) -> int:
    """Every chain completed with its two runners; how many submitters stepped aside."""
    assert [f.state for f in finals] == [ChainState.COMPLETED] * len(runs), [
        (f.chain_id, f.state, f.reason) for f in finals
    ]
    for run in runs:
        runners = [json.loads(line) for line in (run.chain_dir / "runners.jsonl").read_text().splitlines()]
        assert [(r["iter_before"], r["iter_after"]) for r in runners] == [(0, 3), (3, 6)], runners
    return sum("steps aside" in (run.chain_dir / "chain.log").read_text() for run in runs)


def _slots() -> int:
    out = subprocess.run(["sinfo", "-h", "-o", "%C"], capture_output=True, text=True, check=True, timeout=30)
    return int(out.stdout.split("/")[-1])  # allocated/idle/other/total CPUs, one CPU a job


@pytest.mark.slurm
@pytest.mark.alone  # 100 jobs on every slot of the shared cluster: nothing else beside it
def test_a_submitter_mode_sweep_larger_than_the_cluster_completes(slurm_cluster: Any, tmp_path: Path) -> None:
    n = int(2.5 * _slots())
    started = time.monotonic()
    runs = _sweep(tmp_path, n)
    finals = Chain.wait_all(runs, timeout=540, poll=5, check=30)
    took = time.monotonic() - started
    stepped = _check_completed(runs, finals)
    assert stepped > 0, "no submitter had to step aside: the sweep did not fill the cluster"
    print(f"{n} chains on {_slots()} slots: {took:.0f} s, {stepped} stepped aside")


@pytest.mark.slurm
@pytest.mark.alone  # restarts the cluster with a job limit, and without it after
def test_a_submitter_mode_sweep_under_a_per_user_job_limit_completes(slurm_cluster: Any, tmp_path: Path) -> None:
    """sacctmgr's MaxJobs=4 for the user: 6 chains, whose submitters alone could hold every job
    the user may run while their runners wait (AssocMaxJobsLimit)."""
    restart_cluster(slurm_cluster, "--max-jobs", "4")
    try:
        runs = _sweep(tmp_path, 6)
        # the sweep's one query tells which job of a chain waits, and on the limit
        said = wait_until(lambda: _waiting_on_the_limit(runs), 120, interval=2, what="a chain waiting on the limit")
        finals = Chain.wait_all(runs, timeout=420, poll=5, check=30)
        assert _check_completed(runs, finals) > 0
        print(said)
    finally:
        restart_cluster(slurm_cluster)


def _waiting_on_the_limit(runs: list[Chain]) -> str:
    """What ``chain sweep status`` would say of a chain held back by the user's job limit ("" if none is)."""
    statuses = {run.chain_dir: readable_status(run.chain_dir) for run in runs}
    live = {d: s for d, s in statuses.items() if s is not None and not s.state.ended}
    waiting = stranded_chains(live, None).waiting.values() if live else []
    return next((w for w in waiting if "a job limit (AssocMaxJobsLimit)" in w), "")


def _squeue_mine() -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "--me", "-o", "%i %j"], capture_output=True, text=True, check=True, timeout=30
    )
    return out.stdout.split("\n")[:-1]


SUBMIT = [
    "submit",
    "--app-cmd",
    APP,
    "--max-iter",
    "6",
    "--backend",
    "slurm",
    "--runner-time",
    "2:00",
    "--runner-margin",
    "10",
    "--submitter-time",
    "10:00",
    "--poll-max",
    "5",
]


@pytest.mark.slurm
@pytest.mark.alone  # restarts the cluster with a submit limit, and without it after
def test_a_submit_limit_refuses_submitter_mode_and_a_relay_chain_runs_in_it(slurm_cluster: Any, tmp_path: Path) -> None:
    """sacctmgr's MaxSubmitJobs=2 for the user: a submitter's handover needs three jobs queued at
    once, so chain submit refuses submitter mode in one line naming relay mode, before anything is
    queued or written; a relay chain (a runner and its successor) completes within the limit."""
    restart_cluster(slurm_cluster, "--max-submit", "2")
    try:
        refused = chain_cmd(*SUBMIT, cwd=tmp_path, check=False)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "association MaxSubmitJobs=2" in lines[0] and "--mode relay" in lines[0], lines
        assert "Traceback" not in refused.stderr and not (tmp_path / ".chain").exists()
        assert _squeue_mine() == []
        chain_cmd(*SUBMIT, "--mode", "relay", cwd=tmp_path)
        report = wait_ended(tmp_path, timeout=180)
        assert report["state"] == "completed", report
    finally:
        restart_cluster(slurm_cluster)


@pytest.mark.slurm
@pytest.mark.alone  # restarts the cluster with a job limit, and without it after
def test_one_running_job_a_user_is_told_and_submitter_and_runner_take_turns(slurm_cluster: Any, tmp_path: Path) -> None:
    """MaxJobs=1: chain submit says the submitter and its runner take turns and names relay mode,
    refuses it where the submitter would never step aside, and the chain completes by stepping aside."""
    restart_cluster(slurm_cluster, "--max-jobs", "1")
    try:
        never = chain_cmd(*SUBMIT, "--step-aside-after", "0", cwd=tmp_path, check=False)
        assert never.returncode == 2 and "association MaxJobs=1" in never.stderr, never.stderr
        assert not (tmp_path / ".chain").exists()
        told = chain_cmd(*SUBMIT, "--step-aside-after", "3", cwd=tmp_path)
        assert "take turns" in told.stdout + told.stderr and "--mode relay" in told.stdout + told.stderr
        report = wait_ended(tmp_path, timeout=240)
        assert report["state"] == "completed", report
        assert "steps aside" in (tmp_path / ".chain" / "chain.log").read_text()
    finally:
        restart_cluster(slurm_cluster)
