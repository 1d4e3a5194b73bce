"""Judging a runner that left no record (``chain.jobs.watch``): Slurm's exit
code is the job's own only when its batch script exited (COMPLETED, FAILED);
for a job Slurm ended (NODE_FAIL, PREEMPTED, ...) it prints 0:0, an exit the
runner never had."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fakes import FakeBackend
from typer.testing import CliRunner

from chain import api
from chain.backends.base import JobState
from chain.cli.commands import app
from chain.core.decision import Policy, Tally, Verdict, decide
from chain.core.model import ChainState
from chain.effects.ending import record_judgment
from chain.effects.executor import Executor
from chain.jobs.watch import RunnerWatch
from chain.store import ChainDir, ChainStatus, write_json


def _judge_unrecorded(tmp_path: Path, state: JobState) -> ChainDir:
    """Runner 1 (job 7) ended ``state`` with Slurm's 0:0 and no record of
    its own; the submitter judges it as it does (watch, decide, record)."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10, "backend": "local"}, {}, None, tmp_path)
    write_json(chain.settings_file, settings.to_json())
    status = ChainStatus(
        chain_id="c-1", workdir=str(tmp_path), backend="local", runner_seq=1, runner_job_id="7", runner_live=True
    )
    chain.save_status(status)
    fake = FakeBackend()
    fake.set_state("7", state, exit_code=0)
    watch = RunnerWatch(chain, fake, tmp_path / settings.ckpt_path, sleep=lambda s: None)
    outcome = watch.outcome_of(status)
    assert not outcome.recorded
    decision = decide(outcome, Policy(settings.max_iter), Tally())
    assert decision.verdict is Verdict.CONTINUE  # the decision goes by the state, not the code
    record_judgment(Executor(chain, FakeBackend()), settings, status, outcome, decision)
    status.state, status.reason = ChainState.STOPPED, "stopped for the test"
    chain.save_status(status)
    return chain


def test_a_node_fail_runner_is_recorded_and_shown_with_no_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = _judge_unrecorded(tmp_path, JobState.NODE_FAIL)
    [entry] = list(chain.iter_runners())
    assert entry.state == "NODE_FAIL" and entry.exit_code is None
    monkeypatch.chdir(tmp_path)
    data = json.loads(CliRunner().invoke(app, ["status", "--json"]).stdout)
    assert data["runners"][0]["exit_code"] is None
    table = CliRunner().invoke(app, ["status"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.stderr
    [row] = [line for line in table.stdout.splitlines() if "NODE_FAIL" in line]
    # "#", job, state, exit, counter: nothing between the state and the counter
    assert re.sub(r"[│|]", " ", row).split()[:4] == ["1", "7", "NODE_FAIL", "0->0"], row


def _stopped_without_counter(tmp_path: Path, mode: str) -> tuple[ChainDir, FakeBackend, object]:
    """A chain whose runner 1 (job 101) ran an app that never wrote its
    counter file (CKPT_PATH out/iter.txt), stopped at the deadline: its
    record as the runner writes it."""
    from chain.core.records import RunnerPhase, RunnerRecord

    fake = FakeBackend()
    api.submit(
        {"app_cmd": "true", "max_iter": 10, "mode": mode, "ckpt_path": "out/iter.txt"},
        {},
        config=None,
        chain_dir=tmp_path / ".chain",
        workdir=tmp_path,
        backend=fake,
    )
    chain = ChainDir(tmp_path / ".chain")
    status = chain.load_status()
    assert status is not None
    status.runner_seq, status.runner_job_id, status.runner_live, status.next_job_id = 1, "101", True, ""
    chain.save_status(status)
    record = RunnerRecord(
        "101",
        "x.r1",
        seq=1,
        status=RunnerPhase.ENDED,
        exit_code=1,
        iter_before=0,
        iter_after=0,
        start=1.0,
        end=2.0,
        stop_sent=1.5,
        detail="app stopped on the signal",
    )
    chain.write_runner_record(record)
    fake.set_state("101", JobState.FAILED)  # its job has left the queue (runner exit 1)
    return chain, fake, record


def test_the_submitters_reason_names_the_counter_file_the_app_never_wrote(tmp_path: Path) -> None:
    """Not "stopped at the deadline without checkpoint
    advance (0->0)"."""
    from chain import api as chain_api
    from chain.jobs.submitter import Submitter

    chain, fake, _ = _stopped_without_counter(tmp_path, "submitter")
    sub = Submitter(chain, chain_api.stored_settings(chain), fake, tmp_path, "100", sleep=lambda s: None)
    sub.run()
    status = chain.load_status()
    assert status is not None and status.state is ChainState.FAILED
    assert "the app never wrote its counter file out/iter.txt" in status.reason, status.reason


def test_a_relay_runners_reason_names_the_counter_file_the_app_never_wrote(tmp_path: Path) -> None:
    from chain import api as chain_api
    from chain.core.records import RunnerRecord
    from chain.jobs.relay import Relay, Turn

    chain, fake, record = _stopped_without_counter(tmp_path, "relay")
    relay = Relay(chain, chain_api.stored_settings(chain), fake, tmp_path, "101", 1, sleep=lambda s: None)
    assert isinstance(record, RunnerRecord)
    take = relay.after_app(record)
    assert take.step is Turn.END
    assert "the app never wrote its counter file out/iter.txt" in take.why, take.why
