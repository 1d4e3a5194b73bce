"""On the multi-node dev cluster (``dev-cluster up --nodes 3``):
examples/python/ddp/train.py chained across two nodes, launched both ways
users do: srun, one task per rank (one a node), and ``--launcher torchrun``,
one torchrun a node, composed by chain. The chain runs in
three or more runners (each stopped at its deadline, every rank stopping at
the same step; four ranks under torchrun) and ends bit-identical to an uninterrupted run of as many
ranks: the same weights digest and every step's loss. A node lost under a runner is survived and left out. Every rank of an
srun step gets the stop signal, and none outlives its runner, also when one
ignores the signal and is killed. Marked ``multinode``: not in scripts/test's
default run yet.

Every test cancels its chain and any job left from its directory at its end,
passed or failed (``cleanup``): a leftover two-node runner would keep a later
test's cluster busy."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ddp_reference import TRAIN, free_port, losses, references
from e2e_helpers import cancel_jobs_under, chain_cmd, restart_cluster, wait_ended
from rank_procs import processes_of, steps_logged, stop_one_rank
from waiting import wait_until

from chain.jobs.launching import rank_wrapper, read_rank_ends
from chain.store import ChainDir

STEPS = 140
SRUN = ["--launch-mode", "srun", "--nodes", "2", "--ntasks-per-node", "1"]
# the ranks' environment (sbatch passes it on): the dev cluster's node names resolve nowhere, so
# gloo finds no address of its own from a node's hostname (it fell back to 127.0.0.1): it is told
# the interface, as sites tell it theirs (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME)
RANK_ENV = {"STEP_SECONDS": "0.4", "GLOO_SOCKET_IFNAME": "eth0"}
FINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int, int], Path]:
    """The uninterrupted run of N ranks for S steps, made once for each (N, S) asked for."""
    by_steps: dict[int, Callable[[int], Path]] = {}

    def get(world: int, steps: int) -> Path:
        if steps not in by_steps:
            by_steps[steps] = references(tmp_path_factory, steps)
        return by_steps[steps](world)

    return get


@pytest.fixture(scope="module")
def three_nodes(slurm_cluster: Any) -> Any:
    restart_cluster(slurm_cluster, "--nodes", "3")
    yield slurm_cluster
    restart_cluster(slurm_cluster)


def cancel_everything_under(root: Path) -> None:
    """Every chain under ROOT cancelled, then every job still queued from a directory under ROOT
    scancelled, and waited out (60 s): a failed test leaves nothing behind."""
    for chain_dir in root.glob("**/.chain"):
        try:
            chain_cmd("cancel", cwd=chain_dir.parent, check=False, timeout=60)
        except subprocess.TimeoutExpired:
            pass
    cancel_jobs_under(root)


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[Path]:
    """The test's directory; at the end, whatever the outcome, nothing of it left in the queue."""
    yield tmp_path
    cancel_everything_under(tmp_path)


@dataclass(frozen=True)
class Launch:
    """How the test launches the ranks, and the runner time that gives it three runners or more."""

    app: str
    flags: tuple[str, ...]
    world: int
    runner_time: str
    step_seconds: str
    steps: int


# runner times, for 140 steps of 0.41 s (57 s): the first step comes 4-6 s after a runner's start
# with srun's ranks, 5-21 s with torchrun's one worker a node (the agent, then its worker, imports
# torch); the ranks stop ~5.5 s before the stop signal (TrainLoop's lead, at CHAIN_DEADLINE). So 0:38
# (24.5 s to step in): at most ~61 steps a runner, so two never reach 140, and steps in each runner
# even after the slowest start. torchrun runs two workers a node (four ranks: the sums of three or
# more are exact only through the example's rank_order_mean); six processes importing torch on the
# dev cluster's two CPUs start later, so its runners get 0:45 (at most ~64 steps a runner). The test
# stops its runner 1 through one rank 12 steps in (~15 steps): 100 steps then take three runners or more.
LAUNCHES = {
    "srun": Launch("python3 train.py", ("--launch-mode", "srun", "--ntasks-per-node", "1"), 2, "0:38", "0.4", STEPS),
    "torchrun": Launch("train.py", ("--launcher", "torchrun", "--nproc-per-node", "2"), 4, "0:45", "0.4", 100),
}


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # restarts the cluster with three nodes
@pytest.mark.heavy  # two torch ranks per runner
@pytest.mark.parametrize("how", sorted(LAUNCHES))
def test_a_two_node_ddp_chain_ends_bit_identical(
    three_nodes: Any, reference: Callable[[int, int], Path], cleanup: Path, how: str
) -> None:
    """srun's ranks (one a node), or one torchrun a node composed by chain (the app command is the
    script) with two workers each: three runners or more, each stopping every rank at one step,
    ending bit-identical to an uninterrupted run of as many ranks. Under torchrun, runner 1 is
    stopped by a SIGTERM to one rank on the second node alone."""
    launch = LAUNCHES[how]
    chained = cleanup / "chained"
    chained.mkdir()
    shutil.copy(TRAIN, chained / "train.py")
    chain_cmd(
        "submit",
        "--backend",
        "slurm",
        "--max-iter",
        str(launch.steps),
        "--checkpoint-every",
        "1000",
        "--app-cmd",
        launch.app,
        "--nodes",
        "2",
        *launch.flags,
        "--runner-time",
        launch.runner_time,
        "--runner-margin",
        "8",
        "--fixed-margin",
        "--poll-max",
        "5",
        cwd=chained,
        env={**RANK_ENV, "STEP_SECONDS": launch.step_seconds},
    )
    with ThreadPoolExecutor(1) as pool:  # torchrun: runner 1 stopped through rank 3 alone
        step = lambda line: int(line.split(",")[0])
        stopping = (
            pool.submit(stop_one_rank, chained, lambda: steps_logged(chained / "metrics.csv", step), 12, 3, set())
            if how == "torchrun"
            else None
        )
        report = wait_ended(chained, timeout=600)
        stopped = stopping.result(timeout=60) if stopping is not None else None
    assert report["state"] == "completed", report
    runners = report["runners"]
    assert len(runners) >= 3, [r["reason"] for r in runners]
    store = ChainDir(chained / ".chain")
    records = [store.runner_record(judged["job_id"]) for judged in runners]
    for record in records:  # each runner on two nodes of the three
        assert record is not None and len(set(record.nodes)) == 2, record
    # every rank stopped at the step rank 0 saved: each runner's logs name one step
    for rank in range(launch.world):
        log = (chained / f"train_rank{rank}.log").read_text()
        assert log.count("exit 99 at step") == len(runners) - 1, log
    if how == "torchrun":  # judged by the ranks' records, whatever torchrun exited with
        assert all(r is not None and r.exit_code in (99, 124) for r in records[:-1]), records
        # the stop that reached rank 3 alone stopped all four: chain never had to signal them
        assert runners[0]["job_id"] == stopped and records[0] is not None and records[0].stop_sent is None, records[0]
    whole = reference(launch.world, launch.steps)
    assert (chained / "weights.sha256").read_text() == (whole / "weights.sha256").read_text()
    assert losses(chained) == losses(whole)


HF_APP = TRAIN.parents[3] / "tests" / "app" / "hf" / "train_hf.py"
# 120 steps of 0.25 s, 0:55 runners (the stop signal 47 s after a runner's start; the first step
# 5-26 s in: six processes import transformers on the dev cluster's two CPUs, slowest in CI). The
# test stops one rank of runners 1 and 2 once each has taken 25 steps (or not at all if it ended
# first, with fewer): those two advance ~55 steps at most, so a third runner always follows,
# whatever the start-up, and the count of runners does not hang on the machine's load.
HF_STEPS = 120
HF_STOP_AFTER = 25


def _hf_losses(path: Path) -> dict[int, float]:
    """The Trainer's logged loss at each step (every process logs the same mean; the last row kept)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {row["step"]: row["loss"] for row in rows}


def _accelerate_whole(workdir: Path, world: int) -> Path:
    """The uninterrupted run: ``accelerate launch`` of ``world`` processes on this machine, each
    through chain's rank wrapper and judged by its own end as chain judges a runner's: a gloo
    process that finished may abort in its teardown (SIGABRT after its last step), and the
    launcher's code says so, not how the training ended."""
    shutil.copy(HF_APP, workdir / "train_hf.py")
    (workdir / "ranks").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CHAIN_"))}
    env.update(MAX_ITER=str(HF_STEPS), CKPT_PATH="state_iter.txt", CHECKPOINT_EVERY="1000", STEP_SECONDS="0")
    env.update(PYTHONPATH=str(TRAIN.parents[3]), CHAIN_RANKS_DIR=str(workdir / "ranks"))
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines=1"]
    argv += [f"--num_processes={world}", "--machine_rank=0", "--main_process_ip=127.0.0.1"]
    argv += [f"--main_process_port={free_port()}", str(rank_wrapper()), "train_hf.py"]
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=400, check=False)
    ends = {end.rank: end.exit_code for end in read_rank_ends(workdir / "ranks", world)}
    assert ends == dict.fromkeys(range(world), 0), (ends, done.returncode, done.stderr[-3000:])
    assert (workdir / "state_iter.txt").read_text().strip() == str(HF_STEPS), done.stderr[-3000:]
    return workdir


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # on the three-node cluster
@pytest.mark.heavy  # six processes importing transformers per runner
def test_an_accelerate_hf_trainer_chain_of_two_nodes_by_two_processes_is_exact(
    three_nodes: Any, cleanup: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A Hugging Face Trainer script (a tiny GPT-2 from a config, gloo) as users launch it,
    ``--launcher accelerate --nodes 2 --nproc-per-node 2 --app-cmd train_hf.py``: three runners or
    more; a stop that reaches one process (on the second node) stops all four at one step; the
    losses of every step are those of an uninterrupted four-process run (the script calls
    ``rank_order_gradients``)."""
    chained = cleanup / "chained"
    chained.mkdir()
    shutil.copy(HF_APP, chained / "train_hf.py")
    chain_cmd(
        "submit",
        *("--backend", "slurm", "--max-iter", str(HF_STEPS), "--checkpoint-every", "1000"),
        *("--launcher", "accelerate", "--nodes", "2", "--nproc-per-node", "2", "--app-cmd", "train_hf.py"),
        *("--runner-time", "0:55", "--runner-margin", "8", "--fixed-margin", "--poll-max", "5"),
        cwd=chained,
        env={**RANK_ENV, "STEP_SECONDS": "0.25"},
    )

    def stop_two() -> list[str]:  # rank 3 (the second node's second process) of runners 1 and 2
        steps, seen = lambda: steps_logged(chained / "loss.jsonl", lambda line: json.loads(line)["step"]), set[str]()
        return [stop_one_rank(chained, steps, HF_STOP_AFTER, 3, seen) for _ in range(2)]

    with ThreadPoolExecutor(1) as pool:
        stopping = pool.submit(stop_two)
        whole = _accelerate_whole(tmp_path_factory.mktemp("hfwhole"), 4)  # while the chain runs
        stopped = stopping.result(timeout=600)
    report = wait_ended(chained, timeout=600)
    assert report["state"] == "completed", (report["reason"], [r["reason"] for r in report["runners"]])
    runners = report["runners"]
    assert len(runners) >= 3 and [r["job_id"] for r in runners[:2]] == stopped, (stopped, runners)
    store = ChainDir(chained / ".chain")
    records = [store.runner_record(judged["job_id"]) for judged in runners]
    for record in records:
        assert record is not None and len(set(record.nodes)) == 2, record
    # judged by the processes' own ends: every runner but the last checkpointed
    assert all(r is not None and r.exit_code in (99, 124) for r in records[:-1]), records
    # the stop that reached rank 3 alone stopped every process: chain never had to signal them
    assert all(r is not None and r.stop_sent is None and r.exit_code == 99 for r in records[:2]), records[:2]
    assert _hf_losses(chained / "loss.jsonl") == _hf_losses(whole / "loss.jsonl")


def _runner_on(chained: Path, node: str, timeout: float) -> str:
    """The job id of the chain's current runner once it runs on ``node`` and the app has saved once."""
    store = ChainDir(chained / ".chain")

    def running_there() -> str | None:
        status = store.load_status()
        record = store.runner_record(status.runner_job_id) if status and status.runner_job_id else None
        counter = chained / "state_iter.txt"  # chain's default CKPT_PATH
        if (
            record is not None
            and node in record.nodes
            and record.app_start
            and counter.exists()
            and int(counter.read_text() or 0) > 0
        ):
            return record.job_id
        return None

    job: str = wait_until(running_there, timeout, interval=1, what=f"a runner on {node} past its first save")
    return job


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # takes a node of the three-node cluster away
@pytest.mark.heavy
def test_a_node_lost_mid_run_is_survived_and_left_out(
    three_nodes: Any, reference: Callable[[int, int], Path], cleanup: Path
) -> None:
    """n2 crashes under a two-node runner: the chain goes on from the last checkpoint on the other
    nodes, ends bit-identical to an uninterrupted run (the lost steps were redone exactly), and
    n2 is excluded from the runners after it (--exclude-after 1)."""
    chained = cleanup / "chained"
    chained.mkdir()
    shutil.copy(TRAIN, chained / "train.py")
    chain_cmd(
        "submit",
        "--backend",
        "slurm",
        "--max-iter",
        str(STEPS),
        "--checkpoint-every",
        "20",
        "--app-cmd",
        "python3 train.py",
        *SRUN,
        "--runner-time",
        "3:00",
        "--runner-margin",
        "10",
        "--exclude-after",
        "1",
        "--retries",
        "2",
        "--poll-max",
        "5",
        cwd=chained,
        env={**RANK_ENV, "STEP_SECONDS": "0.2"},
    )  # the first save ~4 s in, 120 steps left: 25 s
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
    later = [store.runner_record(j) for j in jobs[jobs.index(lost) + 1 :]]
    assert later and all(r is not None and "n2" not in r.nodes for r in later), later
    whole = reference(2, STEPS)
    assert (chained / "weights.sha256").read_text() == (whole / "weights.sha256").read_text()
    assert losses(chained) == losses(whole)


# One srun task per rank, two nodes of two ranks. Each rank notes "<job> <rank> <node> <pid>" at start
# and "<job> <rank> exit" on the stop signal (rank 0 keeps the counter); in the second runner (the
# first with a checkpoint to resume from) rank $DEAF_RANK ignores the stop signal, as a rank stuck in a
# collective would.
RANKS_APP = """\
i=$(cat "$CKPT_PATH" 2>/dev/null || echo 0)
stop=
if [[ $SLURM_PROCID == "$DEAF_RANK" && ! -e deaf ]] && ((i > 0)); then : > deaf; trap '' TERM; else trap 'stop=1' TERM; fi
echo "$SLURM_JOB_ID $SLURM_PROCID $(hostname) $$" >> ranks.txt
while [[ -z $stop ]]; do
    sleep 0.5 & wait $!
    i=$((i + 1))
    if ((SLURM_PROCID == 0)); then echo $i > "$CKPT_PATH.tmp" && mv "$CKPT_PATH.tmp" "$CKPT_PATH"; fi
done
echo "$SLURM_JOB_ID $SLURM_PROCID exit" >> ranks.txt
exit 99
"""


def _job_state(job: str) -> str:
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    return next((w.partition("=")[2] for w in out.split() if w.startswith("JobState=")), "")


@pytest.mark.slurm
@pytest.mark.multinode
@pytest.mark.alone  # on the three-node cluster
def test_every_rank_gets_the_stop_signal_and_none_outlives_its_runner(three_nodes: Any, cleanup: Path) -> None:
    """srun mode, two nodes of two ranks: runner 1 stops at its deadline, every rank on the signal;
    in runner 2 rank 3 ignores it and the runner kills the app after the grace. Once Slurm has a
    runner's job ended, no process of its app is left on any node, and no rank of a runner ever ran
    beside the next runner's."""
    workdir = cleanup / "ranks"
    workdir.mkdir()
    (workdir / "ranks.sh").write_text(RANKS_APP)
    chain_cmd(
        "submit",
        "--backend",
        "slurm",
        "--max-iter",
        "100000",
        "--app-cmd",
        "bash ranks.sh",
        "--launch-mode",
        "srun",
        "--nodes",
        "2",
        "--ntasks-per-node",
        "2",
        "--runner-time",
        "0:15",
        "--runner-margin",
        "5",
        "--fixed-margin",
        "--poll-max",
        "5",
        cwd=workdir,
        env={"DEAF_RANK": "3"},
    )
    lines = workdir / "ranks.txt"
    over: dict[str, float] = {}  # a runner job -> when it was seen ended, nothing of it left
    t0 = time.monotonic()

    def two_runners_over() -> bool:
        noted = [line.split() for line in lines.read_text().splitlines()] if lines.exists() else []
        jobs = list(dict.fromkeys(words[0] for words in noted))
        for earlier, later in itertools.pairwise(jobs):  # a rank of the later runner has started
            left = [] if earlier in over else processes_of(earlier, "CHAIN_DEADLINE")
            assert not left, f"the app of job {earlier} still ran beside {later}'s: {left}"
        for job in jobs:
            if job not in over and _job_state(job) in FINAL:
                left = processes_of(job, "CHAIN_DEADLINE")
                assert not left, f"job {job} ended ({_job_state(job)}), these of its app are left: {left}"
                over[job] = time.monotonic() - t0
        return len(over) >= 2

    wait_until(
        two_runners_over,
        150,
        interval=0.5,
        what="two runners ended",
        describe=lambda: (over, lines.read_text() if lines.exists() else ""),
    )
    chain_cmd("cancel", cwd=workdir)
    store = ChainDir(workdir / ".chain")
    first, second = list(over)[:2]
    noted = [line.split() for line in lines.read_text().splitlines()]
    for job in (first, second):
        ranks = {(words[1], words[2]) for words in noted if words[0] == job and len(words) == 4}
        assert {r for r, _ in ranks} == {"0", "1", "2", "3"} and len({n for _, n in ranks}) == 2, ranks
    exited = {
        job: sorted(words[1] for words in noted if words[0] == job and words[2:] == ["exit"]) for job in (first, second)
    }
    record1, record2 = store.runner_record(first), store.runner_record(second)
    assert record1 is not None and record2 is not None
    # runner 1: every rank got the stop signal and exited on it, nothing was killed
    assert record1.stop_sent is not None and not record1.killed and exited[first] == ["0", "1", "2", "3"], (
        record1,
        exited,
    )
    # runner 2: the deaf rank alone outlived the grace and was killed; the chain went on (124)
    assert record2.stop_sent is not None and record2.killed and exited[second] == ["0", "1", "2"], (record2, exited)
    assert (
        record2.exit_code == 124
        and record2.iter_after is not None
        and record2.iter_before is not None
        and record2.iter_after > record2.iter_before
    ), record2
    print(f"runner jobs seen ended, nothing left, at {over} s")
