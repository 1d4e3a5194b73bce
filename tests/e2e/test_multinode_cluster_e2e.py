"""The multi-node dev cluster. ``dev-cluster up --nodes 3`` gives
three slurmd, each in its own network and UTS namespace (hostnames n1..n3),
with one slurmctld; jobs on them reach slurmctld and slurmdbd (sbatch, squeue,
scontrol, sacct: what chain's runners call), srun starts steps across nodes,
and ``node-down n2`` / ``node-up n2`` take a node away (a crash: every process
in its namespace SIGKILLed) and give it back. The plain one-node cluster is
restored at the end, after every job the test submitted is cancelled,
passed or failed (one left asking for nodes the one-node cluster lacks would
pend for ever, and a later test expects an empty queue).

What Slurm 22.05.8 did here with SlurmdTimeout=30 (measured by hand on a
second instance): n2 NOT_RESPONDING 13-29 s after node-down, DOWN and its
jobs ended NODE_FAIL 36-51 s after; a requeueable batch job came back
PENDING (Reason BeginTime, Restarts=1, EligibleTime = requeue + 121 s) with a
NODE_FAIL record in ``sacct -D``; a ``--no-requeue`` job stayed NODE_FAIL; a
2-node job on n2 and n3 was requeued as a whole. ``node-up n2``: idle in <1 s.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import cancel_jobs_under, restart_cluster
from waiting import wait_until

NODES = ("n1", "n2", "n3")


def _run(*cmd: str, timeout: float = 30) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}: {done.stdout}{done.stderr}"
    return done.stdout


def _dev_cluster(cluster: Any, *args: str) -> str:
    return _run("bash", str(cluster.script), *args, timeout=120)


def _node_states() -> dict[str, str]:
    """Each node's state as sinfo prints it ('idle', 'idle*' when not responding, 'down*')."""
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    return {name: state for name, state in (line.split() for line in out.splitlines() if line.strip())}


def _sbatch(where: Path, *args: str) -> str:
    """Submit a job that runs in ``where`` (its work directory: how ``cancel_jobs_under`` finds it)."""
    return _run("sbatch", "--parsable", "--chdir", str(where), *args).strip().split(";")[0]


def _job(job: str) -> dict[str, str]:
    """JobState, Reason, Restarts, NodeList... of `scontrol show job` (empty once purged)."""
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    return {key: value for key, _, value in (word.partition("=") for word in out.split() if "=" in word)}


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_job_state(job: str, states: tuple[str, ...], timeout: float) -> dict[str, str]:
    def reached() -> dict[str, str] | None:
        info = _job(job)
        return info if info.get("JobState") in states else None

    info: dict[str, str] = wait_until(
        reached, timeout, interval=0.5, what=f"job {job} in {states}", describe=lambda: _job(job)
    )
    return info


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # restarts the cluster with three nodes: every other test's jobs would be lost
def test_three_nodes_run_steps_across_them_and_one_can_fail(slurm_cluster: Any, tmp_path: Path) -> None:
    restart_cluster(slurm_cluster, "--nodes", "3")
    try:
        status = _dev_cluster(slurm_cluster, "status")
        assert all(re.search(rf"^slurmd-{n} +running", status, re.MULTILINE) for n in NODES), status
        assert _node_states() == dict.fromkeys(NODES, "idle")

        # one 3-node job: srun on every node, a 2-node step, and the clients a runner calls, from a node
        out = tmp_path / "three"
        out.mkdir()
        job = _sbatch(
            out,
            "-N",
            "3",
            "-o",
            str(out / "job.out"),
            "--wrap",
            "hostname > batch_host; srun hostname > hosts; "
            "srun -N 2 -n 2 bash -c 'echo $SLURM_PROCID $(hostname)' > step; "
            "squeue -h -j $SLURM_JOB_ID -o %N > squeue; "
            "scontrol show job $SLURM_JOB_ID | grep -o 'NumNodes=[0-9]*' > scontrol; "
            "sbatch --parsable -o /dev/null --wrap true > sbatch; "
            "sacct -n -X -j $SLURM_JOB_ID -o JobIDRaw >/dev/null; echo $? > sacct",
        )
        info = _wait_job_state(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT"), 120)
        assert info["JobState"] == "COMPLETED", (info, _lines(out / "job.out"))
        assert _lines(out / "batch_host") == ["n1"]
        assert sorted(_lines(out / "hosts")) == list(NODES)  # three distinct hostnames
        step = sorted(_lines(out / "step"))
        assert [s.split()[0] for s in step] == ["0", "1"] and len({s.split()[1] for s in step}) == 2, step
        assert _lines(out / "squeue") == ["n[1-3]"]
        assert _lines(out / "scontrol") == ["NumNodes=3"]
        assert _lines(out / "sbatch")[0].isdigit() and _lines(out / "sacct") == ["0"]

        # node-down n2: a crash. Jobs on it: requeueable (with a heartbeat), --no-requeue; one on n3 beside
        beat = tmp_path / "beat"
        requeued = _sbatch(
            tmp_path,
            "-w",
            "n2",
            "-o",
            "/dev/null",
            "--wrap",
            f"while :; do echo $(date +%s) $(hostname) ${{SLURM_RESTART_COUNT:-0}} >> {beat}; sleep 1; done",
        )
        lost = _sbatch(tmp_path, "-w", "n2", "--no-requeue", "-o", "/dev/null", "--wrap", "sleep 600")
        beside = _sbatch(tmp_path, "-w", "n3", "-o", "/dev/null", "--wrap", "sleep 600")
        for j in (requeued, lost, beside):
            _wait_job_state(j, ("RUNNING",), 60)
        wait_until(lambda: _lines(beat), 30, interval=0.5, what="the heartbeat job's first beat")
        t0 = time.monotonic()
        _dev_cluster(slurm_cluster, "node-down", "n2")
        time.sleep(3)
        beats = len(_lines(beat))
        time.sleep(3)
        assert len(_lines(beat)) == beats, "the job on n2 still ran after node-down"
        wait_until(
            lambda: _node_states().get("n2", "").endswith("*"),
            60,
            interval=1,
            what="n2 not responding",
            describe=_node_states,
        )
        not_responding = time.monotonic() - t0
        wait_until(
            lambda: _node_states().get("n2", "").startswith("down"),
            90,
            interval=1,
            what="n2 down",
            describe=_node_states,
        )
        down = time.monotonic() - t0
        _wait_job_state(lost, ("NODE_FAIL",), 30)
        info = _wait_job_state(requeued, ("PENDING",), 30)
        assert info["Restarts"] == "1", info

        def node_fail_record() -> str | None:
            records = _run("sacct", "-D", "-n", "-X", "-P", "-j", requeued, "-o", "State")
            return records if "NODE_FAIL" in records else None

        history = wait_until(node_fail_record, 30, interval=1, what=f"job {requeued}'s NODE_FAIL record in sacct -D")
        assert _job(beside)["JobState"] == "RUNNING"
        print(
            f"n2 not responding after {not_responding:.0f} s, down after {down:.0f} s; "
            f"requeued job's records: {history.split()}, {info['Reason']}, EligibleTime {info['EligibleTime']}"
        )

        # node-up n2: back at once; the requeued job (held until requeue + 121 s) runs there again
        _dev_cluster(slurm_cluster, "node-up", "n2")
        assert _node_states()["n2"] in ("idle", "mixed")
        _run("scontrol", "update", f"jobid={requeued}", "StartTime=now")
        _wait_job_state(requeued, ("RUNNING",), 90)
        wait_until(
            lambda: any(line.split()[1:] == ["n2", "1"] for line in _lines(beat)),
            60,
            interval=0.5,
            what="a beat of the requeued job (restart 1) on n2",
            describe=lambda: _lines(beat)[-3:],
        )
    finally:
        cancel_jobs_under(tmp_path)  # passed or failed, nothing of the test left in the queue
        restart_cluster(slurm_cluster)
    assert _node_states() == {slurm_cluster.node: "idle"}
    assert "slurmd-n" not in _dev_cluster(slurm_cluster, "status")  # and `up` removed the namespaces
