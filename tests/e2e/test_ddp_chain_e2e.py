"""Issue 30 on the multi-node dev cluster (``dev-cluster up --nodes 3``):
examples/python/ddp/train.py chained across two nodes, one rank per node,
launched by srun one task per rank (srun of one torchrun per node: not yet,
see the parametrize note). The chain runs in three or more runners (each
stopped at its deadline, every rank stopping at the same step) and ends
bit-identical to an uninterrupted two-rank run: the same weights digest and
every step's loss. A node lost under a runner is survived and left out.
Marked ``multinode``: not in scripts/test's default run yet."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import EXAMPLES, chain_cmd, restart_cluster, wait_ended
from waiting import wait_until

from chain.store import ChainDir

TRAIN = EXAMPLES / "python" / "ddp" / "train.py"
STEPS = 120
SRUN = ["--launch-mode", "srun", "--nodes", "2", "--ntasks-per-node", "1"]
# the ranks' environment (sbatch passes it on): gloo finds no address of its own from a node's
# hostname in the dev cluster's namespaces (it fell back to 127.0.0.1): it is told the interface,
# as sites tell it theirs (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME)
RANK_ENV = {"STEP_SECONDS": "0.4", "GLOO_SOCKET_IFNAME": "eth0"}
TORCHRUN = ("python3 -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --node-rank $SLURM_NODEID "
            "--master-addr $SLURM_LAUNCH_NODE_IPADDR --master-port $((20000 + SLURM_JOB_ID % 20000)) train.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _uninterrupted(workdir: Path, steps: int = STEPS) -> None:
    """The reference: the same two ranks on this machine, never stopped."""
    shutil.copy(TRAIN, workdir / "train.py")
    port, procs = str(_free_port()), []
    for rank in (0, 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CHAIN_"))}
        env.update(MAX_ITER=str(steps), CKPT_PATH="counter.txt", STEP_SECONDS="0", RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, PYTHONPATH=str(EXAMPLES.parent))
        procs.append(subprocess.Popen([sys.executable, "train.py"], cwd=workdir, env=env))
    assert [p.wait(timeout=300) for p in procs] == [0, 0]


def _losses(workdir: Path) -> dict[int, str]:
    rows = [line.split(",") for line in (workdir / "metrics.csv").read_text().splitlines()]
    return {int(step): loss for step, loss in rows}


@pytest.fixture(scope="module")
def three_nodes(slurm_cluster: Any) -> Any:
    restart_cluster(slurm_cluster, "--nodes", "3")
    yield slurm_cluster
    restart_cluster(slurm_cluster)


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # restarts the cluster with three nodes
@pytest.mark.heavy  # two torch ranks per runner
# torchrun (one per node, static rendezvous) is not here yet: on the dev cluster its workers hung in
# init_process_group for the whole runner (40 s; the gloo interface given), not understood yet
@pytest.mark.parametrize("launch, runner_time, steps", [("srun", "0:45", 120)])
def test_a_two_node_ddp_chain_ends_bit_identical(three_nodes: Any, launch: str, runner_time: str, steps: int,
                                                 tmp_path: Path) -> None:
    whole, chained = tmp_path / "whole", tmp_path / "chained"
    whole.mkdir()
    chained.mkdir()
    _uninterrupted(whole, steps)
    shutil.copy(TRAIN, chained / "train.py")
    app = "python3 train.py" if launch == "srun" else TORCHRUN
    chain_cmd("submit", "--backend", "slurm", "--max-iter", str(steps), "--checkpoint-every", "1000",
              "--app-cmd", app, *SRUN, "--runner-time", runner_time, "--runner-margin", "8", "--fixed-margin",
              "--poll-max", "5", cwd=chained, env=RANK_ENV)
    report = wait_ended(chained, timeout=420)
    assert report["state"] == "completed", report
    runners = report["runners"]
    assert len(runners) >= 3, [r["reason"] for r in runners]
    store = ChainDir(chained / ".chain")
    for judged in runners:  # each runner on two nodes of the three
        record = store.runner_record(judged["job_id"])
        assert record is not None and len(set(record.nodes)) == 2, record
    # every rank stopped at the step rank 0 saved: each runner's logs name one step
    for rank in (0, 1):
        log = (chained / f"train_rank{rank}.log").read_text()
        assert log.count("exit 99 at step") == len(runners) - 1, log
    assert (chained / "weights.sha256").read_text() == (whole / "weights.sha256").read_text()
    assert _losses(chained) == _losses(whole)


def _runner_on(chained: Path, node: str, timeout: float) -> str:
    """The job id of the chain's current runner once it runs on ``node`` and the app has saved once."""
    store = ChainDir(chained / ".chain")

    def running_there() -> str | None:
        status = store.load_status()
        record = store.runner_record(status.runner_job_id) if status and status.runner_job_id else None
        counter = chained / "state_iter.txt"  # chain's default CKPT_PATH
        if record is not None and node in record.nodes and record.app_start and counter.exists() \
                and int(counter.read_text() or 0) > 0:
            return record.job_id
        return None

    job: str = wait_until(running_there, timeout, interval=1, what=f"a runner on {node} past its first save")
    return job


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # takes a node of the three-node cluster away
@pytest.mark.heavy
def test_a_node_lost_mid_run_is_survived_and_left_out(three_nodes: Any, tmp_path: Path) -> None:
    """n2 crashes under a two-node runner: the chain goes on from the last checkpoint on the other
    nodes, ends bit-identical to an uninterrupted run (the lost steps were redone exactly), and
    n2 is excluded from the runners after it (--exclude-after 1)."""
    whole, chained = tmp_path / "whole", tmp_path / "chained"
    whole.mkdir()
    chained.mkdir()
    _uninterrupted(whole)
    shutil.copy(TRAIN, chained / "train.py")
    chain_cmd("submit", "--backend", "slurm", "--max-iter", str(STEPS), "--checkpoint-every", "20",
              "--app-cmd", "python3 train.py", *SRUN, "--runner-time", "3:00", "--runner-margin", "10",
              "--exclude-after", "1", "--retries", "2", "--poll-max", "5", cwd=chained,
              env=RANK_ENV)
    lost = _runner_on(chained, "n2", timeout=120)
    subprocess.run(["bash", str(three_nodes.script), "node-down", "n2"], check=True, timeout=60)
    try:
        report = wait_ended(chained, timeout=420)
    finally:
        subprocess.run(["bash", str(three_nodes.script), "node-up", "n2"], check=True, timeout=180)
    assert report["state"] == "completed", report
    assert report["excluded_nodes"] == ["n2"], report
    store = ChainDir(chained / ".chain")
    jobs = [r["job_id"] for r in report["runners"]]
    later = [store.runner_record(j) for j in jobs[jobs.index(lost) + 1:]]
    assert later and all(r is not None and "n2" not in r.nodes for r in later), later
    assert (chained / "weights.sha256").read_text() == (whole / "weights.sha256").read_text()
    assert _losses(chained) == _losses(whole)
