"""The runner's resume check (chain.jobs.verify) on real files: the newest
checkpoints that fail verification are set aside (renamed, never deleted),
each with a line, the app resumes from the newest that passes, and the
counter chain recorded is never lowered."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from chain import api
from chain.app.atomic import publish_dir
from chain.app.store import CheckpointStore
from chain.core.records import RunnerRecord
from chain.core.settings import Settings
from chain.jobs import runner
from chain.jobs.supervise import AppLock
from chain.jobs.verify import check_resume, structure_problem, verify_before_app
from chain.primitives.codes import RunnerExit
from chain.store import ChainDir, ChainStatus

GLOB = "glob:ck/step-*"


def _settings(tmp_path: Path, counter_cmd: str = GLOB, **flags: Any) -> Settings:
    return api.load_settings(
        {"app_cmd": "true", "max_iter": 100, "counter_cmd": counter_cmd, **flags}, {}, None, tmp_path
    )


def _save(tmp_path: Path, step: int) -> Path:
    """A checkpoint as chain.app writes it: shards in a scratch directory, DONE last, one rename."""
    (tmp_path / "ck").mkdir(exist_ok=True)
    final = tmp_path / "ck" / f"step-{step}"
    with publish_dir(final, meta={"step": step}) as scratch:
        (scratch / "weights.bin").write_bytes(bytes(step % 256 for _ in range(1000)))
    return final


def _truncate(path: Path) -> None:
    with open(path / "weights.bin", "r+b") as fh:
        fh.truncate(10)


def test_a_truncated_newest_is_set_aside_and_the_previous_one_resumed(tmp_path: Path) -> None:
    for step in (10, 20, 30):
        _save(tmp_path, step)
    _truncate(tmp_path / "ck/step-30")
    check = check_resume(_settings(tmp_path), tmp_path, when=1700000000)
    assert not check.error and check.moved
    assert check.lines == (
        (
            "checkpoint ck/step-30 broken (shard weights.bin has 10 bytes, DONE says 1000): "
            "set aside as ck/chain-set-aside/step-30.1700000000; resuming from ck/step-20"
        ),
    )
    assert sorted(os.listdir(tmp_path / "ck")) == ["chain-set-aside", "step-10", "step-20"]
    assert (tmp_path / "ck/chain-set-aside/step-30.1700000000/weights.bin").stat().st_size == 10  # kept as it was


def test_verify_cmd_says_what_complete_means(tmp_path: Path) -> None:
    for step in (10, 20):
        _save(tmp_path, step)
    (tmp_path / "ck/step-20/bad").touch()
    cmd = 'test "$1" = "$CHAIN_CHECKPOINT" && test ! -e "$1/bad" || { echo "found $(basename $1)/bad" >&2; exit 3; }'
    check = check_resume(_settings(tmp_path, verify_cmd=cmd), tmp_path, when=5)
    assert check.lines == (
        (
            "checkpoint ck/step-20 rejected (--verify-cmd exited 3: found step-20/bad): "
            "set aside as ck/chain-set-aside/step-20.5; resuming from ck/step-10"
        ),
    )
    assert (tmp_path / "ck/step-10").is_dir() and not (tmp_path / "ck/step-20").exists()


def test_when_no_checkpoint_passes_nothing_moves_and_the_start_is_refused(tmp_path: Path) -> None:
    for step in (10, 20):
        _save(tmp_path, step)
    check = check_resume(_settings(tmp_path, verify_cmd="exit 1"), tmp_path, when=5)
    assert (
        check.error
        == "no checkpoint passes verification (newest " + str(tmp_path / "ck/step-20") + ": --verify-cmd exited 1)"
    )
    assert sorted(os.listdir(tmp_path / "ck")) == ["step-10", "step-20"]


def test_a_hung_verify_cmd_is_a_rejection_after_its_timeout(tmp_path: Path) -> None:
    _save(tmp_path, 10)
    check = check_resume(_settings(tmp_path, verify_cmd="sleep 30"), tmp_path, when=5, timeout=0.5)
    assert check.error.endswith("--verify-cmd timed out after 0.5 s)")


def test_with_another_counter_verify_cmd_checks_its_file_and_has_nothing_to_fall_back_to(tmp_path: Path) -> None:
    (tmp_path / "state_iter.txt").write_text("40\n")
    ok = check_resume(_settings(tmp_path, "", verify_cmd='grep -qx 40 "$1"'), tmp_path, when=5)
    assert ok.error == "" and not ok.moved
    bad = check_resume(_settings(tmp_path, "", verify_cmd="exit 2"), tmp_path, when=5)
    assert bad.error == "state_iter.txt fails verification (--verify-cmd exited 2); no earlier checkpoint is known"
    assert check_resume(_settings(tmp_path, "cat n", verify_cmd="exit 2"), tmp_path, when=5).lines == (
        "--verify-cmd not run: a shell command's counter names no checkpoint file",
    )


def test_hostile_checkpoints_are_broken_never_waited_on(tmp_path: Path) -> None:
    step = _save(tmp_path, 10)
    (step / "DONE").unlink()
    os.mkfifo(step / "DONE")
    assert "a FIFO" in structure_problem(step, 10)
    (step / "DONE").unlink()
    (step / "DONE").write_text('{"files": {"../../../etc/passwd": {"size": 1}}}')
    assert "outside the checkpoint" in structure_problem(step, 10)
    (step / "DONE").write_text("[" * 100000)
    assert structure_problem(step, 10).startswith("unreadable")
    hf = tmp_path / "out/checkpoint-40"
    hf.mkdir(parents=True)
    (hf / "trainer_state.json").write_text('{"global_step": 39}')
    assert structure_problem(hf, 40) == "trainer_state.json says global_step 39, the name 40"
    single = tmp_path / "ck/ckpt-000000000010.ckpt"
    single.write_bytes(b'CHAINCKPT1\n{"length": 50}\n' + b"x" * 20)
    assert structure_problem(single, 10) == "46 bytes, the header says 76"
    good = CheckpointStore(tmp_path / "store", durable=False).save(10, {"w": [1, 2, 3]})
    assert structure_problem(good.path, 10) == ""


def _chain(tmp_path: Path, settings: Settings, recorded: int) -> ChainDir:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    status = ChainStatus(
        chain_id="c-1", workdir=str(tmp_path), runner_seq=2, runner_job_id="7", runner_live=True, iter_before=recorded
    )
    chain.save_status(status)
    return chain


def _app_settings(tmp_path: Path, app_cmd: str) -> Settings:
    return _settings(tmp_path, app_cmd=app_cmd, runner_time="0:30", runner_margin="5")


def test_the_runner_resumes_from_the_previous_checkpoint_and_keeps_the_recorded_counter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for step in (10, 20, 30):
        _save(tmp_path, step)
    _truncate(tmp_path / "ck/step-30")
    # the app resumes from the newest directory it finds and saves 40
    app = 'ls ck > seen.txt; echo "$CHAIN_RESUMING" > resuming.txt; mkdir -p ck/step-40; touch ck/step-40/DONE; exit 99'
    settings = _app_settings(tmp_path, app)
    chain = _chain(tmp_path, settings, 30)
    code = runner.run(chain, settings, FakeBackend(), job_id="7", job_name="c-1.r2", workdir=tmp_path, clock=time.time)
    record = chain.runner_record("7")
    assert record is not None and code == RunnerExit.CHECKPOINTED
    assert (record.iter_before, record.iter_resumed, record.iter_after) == (30, 20, 40)
    assert (tmp_path / "seen.txt").read_text().split() == ["chain-set-aside", "step-10", "step-20"]
    assert (tmp_path / "resuming.txt").read_text() == "1\n"
    out = capsys.readouterr().out
    assert "chain runner 2 (job 7): checkpoint ck/step-30 broken (shard weights.bin has 10 bytes" in out
    assert json.loads((chain.root / "runners" / "7.json").read_text())["iter_resumed"] == 20


def test_the_runner_refuses_to_start_when_no_checkpoint_passes(tmp_path: Path) -> None:
    _save(tmp_path, 10)
    settings = _settings(tmp_path, app_cmd="touch ran", verify_cmd="exit 1")
    chain = _chain(tmp_path, settings, 10)
    code = runner.run(chain, settings, FakeBackend(), job_id="7", job_name="c-1.r2", workdir=tmp_path, clock=time.time)
    record = chain.runner_record("7")
    assert code == RunnerExit.BAD_CHECKPOINT and record is not None and "no checkpoint passes" in record.detail
    assert not (tmp_path / "ran").exists() and (tmp_path / "ck/step-10").is_dir()


def test_nothing_is_moved_while_an_earlier_app_of_the_chain_holds_its_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for step in (10, 20):
        _save(tmp_path, step)
    _truncate(tmp_path / "ck/step-20")
    settings = _settings(tmp_path)
    chain = _chain(tmp_path, settings, 20)
    held = AppLock(str(chain.root / "app.lock"))
    assert held.acquire(until=0.0, clock=time.time, sleep=time.sleep)
    record = RunnerRecord("7")
    lines: list[str] = []
    try:
        assert verify_before_app(chain, settings, record, tmp_path, lines.append) == ""
    finally:
        held.close()
    assert lines == ["checkpoints not verified: an earlier app of this chain still runs"]
    assert (tmp_path / "ck/step-20").is_dir() and record.iter_resumed is None


def test_a_planted_set_aside_link_is_refused(tmp_path: Path) -> None:
    for step in (10, 20):
        _save(tmp_path, step)
    _truncate(tmp_path / "ck/step-20")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "ck/chain-set-aside").symlink_to(elsewhere)
    check = check_resume(_settings(tmp_path), tmp_path, when=5)
    assert check.error == "cannot set aside ck/step-20: chain-set-aside is not a directory of its own"
    assert (tmp_path / "ck/step-20").is_dir() and not any(elsewhere.iterdir())


def test_a_planted_app_lock_link_leaves_the_checkpoints_alone(tmp_path: Path) -> None:
    for step in (10, 20):
        _save(tmp_path, step)
    _truncate(tmp_path / "ck/step-20")
    settings = _settings(tmp_path)
    chain = _chain(tmp_path, settings, 20)
    (chain.root / "app.lock").symlink_to(tmp_path / "elsewhere.lock")
    lines: list[str] = []
    assert verify_before_app(chain, settings, RunnerRecord("7"), tmp_path, lines.append) == ""
    assert lines == ["checkpoints not verified: cannot open the app lock: Too many levels of symbolic links"]
    assert (tmp_path / "ck/step-20").is_dir() and not (tmp_path / "elsewhere.lock").exists()
