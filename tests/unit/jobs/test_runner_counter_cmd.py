"""The runner with --counter-cmd and --progress-pattern, around a
real app process on the fake scheduler: the counter, CHAIN_RESUMING, the
missing-checkpoint words, saved_at and iter_reached all follow the app's own
checkpoint and output, never CKPT_PATH."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from chain import api
from chain.core.decision import Policy, Tally, decide, missing_counter
from chain.core.records import RunnerRecord
from chain.jobs import runner
from chain.jobs.watch import RunnerWatch
from chain.primitives.codes import RunnerExit
from chain.store import ChainDir, ChainStatus
from chain.store.counter import counter_source, read_counter_state

JSON_SPEC = "json:out/ckpt.json:iter_num"
NAMED = f"out/ckpt.json (--counter-cmd {JSON_SPEC})"
WRITE_150 = "mkdir -p out; echo '{\"iter_num\": 150}' > out/ckpt.json"


def _chain(tmp_path: Path, app_cmd: str, iter_num: int | None, **flags: Any) -> tuple[ChainDir, Any]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings(
        {"app_cmd": app_cmd, "max_iter": 150, "counter_cmd": JSON_SPEC, **flags}, {}, None, tmp_path
    )
    (tmp_path / "state_iter.txt").write_text("40\n")  # CKPT_PATH: never read with a counter spec
    if iter_num is not None:
        (tmp_path / "out").mkdir()
        (tmp_path / "out/ckpt.json").write_text(json.dumps({"iter_num": iter_num, "model": [1, 2]}))
    chain.save_status(
        ChainStatus(
            chain_id="c-1",
            workdir=str(tmp_path),
            runner_seq=1,
            runner_job_id="7",
            runner_live=True,
            iter_before=iter_num or 0,
        )
    )
    return chain, settings


def _run(tmp_path: Path, chain: ChainDir, settings: Any) -> tuple[int, RunnerRecord]:
    code = runner.run(chain, settings, FakeBackend(), job_id="7", job_name="c-1.r1", workdir=tmp_path, clock=time.time)
    record = chain.runner_record("7")
    assert record is not None
    return code, record


@pytest.mark.parametrize(("iter_num", "expected"), [(None, "[]"), (0, "[]"), (60, "[--resume]")])
def test_chain_resuming_follows_the_apps_checkpoint(tmp_path: Path, iter_num: int | None, expected: str) -> None:
    chain, settings = _chain(tmp_path, f'echo "[${{CHAIN_RESUMING:+--resume}}]" > seen; {WRITE_150}', iter_num)
    code, record = _run(tmp_path, chain, settings)
    assert (tmp_path / "seen").read_text().strip() == expected
    assert (code, record.iter_before, record.iter_after) == (0, iter_num or 0, 150)


def test_saved_at_is_the_checkpoints_mtime_at_the_apps_exit(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, f"{WRITE_150}; touch -d @1700000000 out/ckpt.json", 60)
    _, record = _run(tmp_path, chain, settings)
    assert record.saved_at == 1700000000.0


def test_a_checkpoint_never_written_is_named_by_its_spec(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, "exit 3", None)
    _, record = _run(tmp_path, chain, settings)
    assert f"the app never wrote its counter file {NAMED}" in record.detail
    assert "CKPT_PATH" not in record.detail and "state_iter.txt" not in record.detail
    status = chain.load_status()
    assert status is not None
    watch = RunnerWatch(
        chain,
        FakeBackend(),
        tmp_path / settings.ckpt_path,
        ckpt_path=counter_source(settings),
        read=lambda: read_counter_state(settings, tmp_path),
    )
    outcome = watch.outcome(status, record, None)
    assert outcome.missing_counter_file == NAMED
    no_record = watch.outcome(status, None, None)  # a runner that died: the checkpoint is read as it is
    assert (no_record.iter_after, no_record.missing_counter_file) == (0, NAMED)
    reason = decide(outcome, Policy(settings.max_iter), Tally()).reason
    assert NAMED in reason and "CKPT_PATH" not in reason, reason


def test_a_failing_counter_command_stops_the_runner_with_its_reason(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, "exit 0", None, counter_cmd="echo 'cannot open ckpt' >&2; exit 2")
    code, record = _run(tmp_path, chain, settings)
    assert code == RunnerExit.BAD_CHECKPOINT
    assert record.detail == "--counter-cmd \"echo 'cannot open ckpt' >&2; exit 2\" exited 2: cannot open ckpt"


@contextmanager
def stdout_to_file(tmp_path: Path) -> Iterator[Path]:
    """The runner's fd 1 a regular file, as the job's log is (in the test's
    body: pytest puts its own capture back on fd 1 after the fixtures)."""
    log = tmp_path / "job.out"
    saved = os.dup(1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, b"iter 999: an earlier runner's line\n")
    os.dup2(fd, 1)
    os.close(fd)
    try:
        yield log
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def test_the_progress_pattern_records_how_far_the_app_got(tmp_path: Path) -> None:
    app = f'for i in 61 62 63; do echo "iter $i: loss 1.0"; done; {WRITE_150}'
    chain, settings = _chain(tmp_path, app, 60, progress_pattern=r"^iter (\d+):")
    with stdout_to_file(tmp_path) as log:
        _, record = _run(tmp_path, chain, settings)
    assert record.iter_reached == 63  # not 999: written before the app started
    assert "iter 63: loss" in log.read_text()


def test_without_a_pattern_nothing_is_claimed(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, f"echo 'iter 61: loss'; {WRITE_150}", 60)
    with stdout_to_file(tmp_path):
        _, record = _run(tmp_path, chain, settings)
    assert record.iter_reached is None


def test_the_missing_counter_words_name_the_spec_not_ckpt_path() -> None:
    assert missing_counter(NAMED, 0) == f"the app never wrote its counter file {NAMED}"
    assert missing_counter(NAMED, 30) == f"the counter file {NAMED} was gone after the app (it held 30)"
    assert missing_counter("state_iter.txt", 0) == "the app never wrote its counter file state_iter.txt (CKPT_PATH)"
