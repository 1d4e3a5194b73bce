"""``--launcher torchrun`` and ``accelerate`` on one machine (the local
backend: the launcher runs directly, no srun): the user's command is the
script, chain composes the rest. A DDP chain of two workers ends bit-identical to an uninterrupted run;
the runner is judged by what the ranks did, not by torchrun's exit code: a
failed rank is named, and a teardown abort after the last save is a
completion. (Two nodes of the dev cluster: tests/e2e/test_ddp_chain_e2e.py.)"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ddp_reference import TRAIN, losses, references
from e2e_helpers import chain_cmd, wait_ended

from chain.store import ChainDir

STEPS = 100


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    made: Callable[[int], Path] = references(tmp_path_factory, STEPS)
    return made


def _submit(
    workdir: Path, app: str, *flags: str, launcher: str = "torchrun", env: dict[str, str] | None = None
) -> None:
    chain_cmd(
        "submit",
        "--backend",
        "local",
        "--launcher",
        launcher,
        "--app-cmd",
        app,
        *flags,
        "--poll-max",
        "5",
        cwd=workdir,
        env=env,
    )


@pytest.mark.heavy  # a torchrun and two torch workers per runner
def test_a_torchrun_chain_of_two_workers_ends_bit_identical(reference: Callable[[int], Path], tmp_path: Path) -> None:
    # steps of 0.4 s, 22 s a runner: at most ~50 steps after the quickest start, so three runners
    # or more; the workers stop at CHAIN_DEADLINE, before chain's signal, and exit 99: torchrun's 1
    shutil.copy(TRAIN, tmp_path / "train.py")
    _submit(
        tmp_path,
        "train.py",
        "--nproc-per-node",
        "2",
        "--max-iter",
        str(STEPS),
        "--checkpoint-every",
        "1000",
        "--runner-time",
        "0:30",
        "--runner-margin",
        "8",
        "--fixed-margin",
        env={"STEP_SECONDS": "0.4"},
    )
    report = wait_ended(tmp_path, timeout=480)
    assert report["state"] == "completed", report
    runners = report["runners"]
    assert len(runners) >= 3, [r["reason"] for r in runners]
    for rank in (0, 1):
        log = (tmp_path / f"train_rank{rank}.log").read_text()
        assert log.count("exit 99 at step") == len(runners) - 1, log
    store = ChainDir(tmp_path / ".chain")
    records = [store.runner_record(r["job_id"]) for r in runners]
    assert all(r is not None and r.exit_code in (99, 124) for r in records[:-1]), records
    whole = reference(2)
    assert (tmp_path / "weights.sha256").read_text() == (whole / "weights.sha256").read_text()
    assert losses(tmp_path) == losses(whole)


# Two workers: rank 0 keeps the counter. FAIL_RANK exits 3 at once, before any save; ABORT_AT_EXIT makes every rank
# abort in its interpreter's teardown after finishing (as a gloo worker sometimes does).
RANKS_APP = """\
import atexit, os, sys, time
rank = int(os.environ["RANK"])
if os.environ.get("ABORT_AT_EXIT"):
    atexit.register(os.abort)
if os.environ.get("FAIL_RANK"):  # that rank fails at once; the other waits for torchrun to stop it
    if str(rank) == os.environ["FAIL_RANK"]:
        sys.exit(3)
    time.sleep(60)
if rank == 0:
    with open(os.environ["CKPT_PATH"] + ".tmp", "w") as f:
        f.write(os.environ["MAX_ITER"])
    os.replace(os.environ["CKPT_PATH"] + ".tmp", os.environ["CKPT_PATH"])
"""


def _ranks_chain(tmp_path: Path, launcher: str, env: dict[str, str]) -> dict[str, Any]:
    (tmp_path / "ranks.py").write_text(RANKS_APP)
    flags = ("--nproc-per-node", "2", "--max-iter", "5", "--runner-time", "2:00")
    _submit(tmp_path, "ranks.py", *flags, launcher=launcher, env=env)
    report: dict[str, Any] = wait_ended(tmp_path, timeout=240)
    return report


LAUNCHERS = ("torchrun", "accelerate")


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_failed_rank_fails_the_runner_and_is_named(tmp_path: Path, launcher: str) -> None:
    report = _ranks_chain(tmp_path, launcher, {"FAIL_RANK": "1"})
    assert report["state"] == "failed", report
    reason = report["runners"][0]["reason"]
    assert "rank 1" in reason and "exited 3" in reason, reason


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_teardown_abort_after_the_last_save_is_a_completion(tmp_path: Path, launcher: str) -> None:
    report = _ranks_chain(tmp_path, launcher, {"ABORT_AT_EXIT": "1"})
    assert report["state"] == "completed", report
    record = ChainDir(tmp_path / ".chain").runner_record(report["runners"][0]["job_id"])
    assert record is not None and record.exit_code == 0
    assert record.app_exit_code != 0 and f"{launcher} exited" in record.detail, record
    assert "after every rank exited 0" in record.detail, record
