"""The executor's compare-and-save (``chain.effects.executor``): one writer
of ``state.json`` at a time, and nothing another process saved is lost.
Two copies of one chain's status stand for two processes (a submitter and
``chain cancel``, two relay runners); the last test races real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import FakeBackend

from chain.core import events as ev
from chain.core.model import ChainState
from chain.effects.executor import Executor
from chain.errors import ChainDirError, ProtocolError
from chain.jobs.entry import leave_an_ended_chain
from chain.store import ChainDir, ChainStatus

ROOT = Path(__file__).resolve().parents[3]


def _chain(tmp_path: Path) -> ChainDir:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    status = ChainStatus(chain_id="demo-abc123", state=ChainState.RUNNING, runner_seq=3, runner_live=True)
    Executor(chain, FakeBackend()).apply(status, ev.Prepared("local", str(tmp_path)))
    return chain


def _copy(chain: ChainDir) -> ChainStatus:
    """One process's copy, as a job or a command reads it."""
    status = chain.load_status()
    assert status is not None
    return status


def _disk(chain: ChainDir) -> ChainStatus:
    return _copy(chain)


def test_a_save_moves_the_revision_and_the_unsaved_events_are_not_stored(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    status = _copy(chain)
    Executor(chain, FakeBackend()).apply(status, ev.CounterRead(7))
    assert status.unsaved == [ev.CounterRead(7)] and _disk(chain).iteration == 0
    Executor(chain, FakeBackend()).apply(status, ev.HookRan({"name": "report", "rc": 0}))
    assert status.unsaved == [] and status.revision == _disk(chain).revision == 2
    stored = json.loads(chain.state_file.read_text())
    assert "unsaved" not in stored and stored["revision"] == 2 and stored["iteration"] == 7


def test_a_strike_and_a_judgement_saved_by_two_processes_are_both_kept(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    relay, other = _copy(chain), _copy(chain)
    Executor(chain, FakeBackend()).apply(relay, ev.Judged(40, 0, 0, job_id="", blamed=("node7",), exclude_after=1))
    Executor(chain, FakeBackend()).apply(other, ev.HookRan({"name": "notify", "rc": 0}))  # its copy predates the strike
    disk = _disk(chain)
    assert disk.node_strikes == {"node7": 1} and disk.excluded_nodes == ["node7"]
    assert disk.hooks == [{"name": "notify", "rc": 0}] and disk.iteration == 40 and not disk.runner_live
    assert other == disk and disk.revision == 3
    assert "applied again over revision 2, saved by another process" in chain.log_file.read_text()


def test_events_not_saved_yet_are_applied_again_with_the_one_that_saves(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    command, job = _copy(chain), _copy(chain)
    Executor(chain, FakeBackend()).apply(command, ev.Resumed())  # no save of its own: the next event saves it
    Executor(chain, FakeBackend()).apply(job, ev.HookRan({"name": "report", "rc": 0}))
    Executor(chain, FakeBackend()).apply(command, ev.SubmitterQueued("61"))
    disk = _disk(chain)
    assert (disk.state, disk.submitter_cycle, disk.submitter_job_id) == (ChainState.PENDING, 1, "61")
    assert disk.hooks == [{"name": "report", "rc": 0}]


def test_a_cancel_saved_first_refuses_the_submitters_end_and_its_copy_becomes_the_cancel(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    submitter, cancel = _copy(chain), _copy(chain)
    Executor(chain, FakeBackend()).apply(cancel, ev.Ended(ChainState.CANCELLED, "cancelled by chain cancel"))
    with pytest.raises(ProtocolError, match="Ended refused: the chain was cancelled"):
        Executor(chain, FakeBackend()).apply(submitter, ev.Ended(ChainState.STOPPED, "stopped on signal TERM"))
    assert submitter == _disk(chain) and submitter.unsaved == []
    assert (submitter.state, submitter.reason) == (ChainState.CANCELLED, "cancelled by chain cancel")
    assert "(another process changed state.json first)" in chain.log_file.read_text()
    # the job leaves quietly: the chain has ended, its end is not the job's to change
    assert leave_an_ended_chain(chain, "submitter 50", ProtocolError("demo-abc123", "Ended", "x")) == 0
    assert "submitter 50: the chain was cancelled by another process meanwhile; leaving" in chain.log_file.read_text()


def test_a_refusal_while_the_chain_goes_on_is_still_raised_by_the_job(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    refused = ProtocolError("demo-abc123", "RelayTookOver", "job 9 is not the chain's current runner")
    with pytest.raises(ProtocolError):
        leave_an_ended_chain(chain, "runner job 9", refused)


def test_a_runner_submitted_after_a_cancel_is_refused_and_nothing_of_it_is_saved(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    submitter, cancel = _copy(chain), _copy(chain)
    Executor(chain, FakeBackend()).apply(submitter, ev.RunnerIntended(20, 5.0))
    Executor(chain, FakeBackend()).apply(cancel, ev.Ended(ChainState.CANCELLED, "cancelled by chain cancel"))
    with pytest.raises(ProtocolError, match="RunnerSubmitted refused: the chain is cancelled"):
        Executor(chain, FakeBackend()).apply(submitter, ev.RunnerSubmitted("104", 500))
    disk = _disk(chain)
    assert disk.state is ChainState.CANCELLED and disk.runner_job_id == "" and disk.runner_seq == 4
    assert chain.worker_id_list() == []  # its RecordWorker came after the refused save: never carried out


def test_a_failed_save_keeps_the_events_for_the_next_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = _chain(tmp_path)
    status, other = _copy(chain), _copy(chain)
    real = ChainDir.save_status
    calls = []

    def refuse_once(self: ChainDir, s: ChainStatus) -> None:
        calls.append(s.revision)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        real(self, s)

    monkeypatch.setattr(ChainDir, "save_status", refuse_once)
    with pytest.raises(OSError):
        Executor(chain, FakeBackend()).apply(status, ev.HookRan({"name": "a", "rc": 0}))
    assert status.revision == 1 and status.unsaved == [ev.HookRan({"name": "a", "rc": 0})]
    Executor(chain, FakeBackend()).apply(other, ev.HookRan({"name": "b", "rc": 0}))  # another process saves meanwhile
    Executor(chain, FakeBackend()).apply(status, ev.HookRan({"name": "c", "rc": 0}))
    assert [h["name"] for h in _disk(chain).hooks] == ["b", "a", "c"]


def test_a_save_lock_held_too_long_is_one_line(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    held = pytest.raises(ChainDirError, match=r"state.json stayed locked by another process for 5 s")
    with chain.saving(), held, chain.saving(wait=5.0, clock=lambda: now[0], sleep=sleep):
        pass
    assert now[0] >= 5.0


def test_a_state_file_naming_unsaved_events_or_lacking_a_revision_reads(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    data = json.loads(chain.state_file.read_text())
    data.pop("revision")
    data["unsaved"] = [{"evil": 1}]  # never read: what a process holds is not in the file
    chain.state_file.write_text(json.dumps(data))
    status = _copy(chain)
    assert status.revision == 0 and status.unsaved == []


RACER = """
import sys
from pathlib import Path
from chain.core import events as ev
from chain.effects.executor import Executor
from chain.store import ChainDir
from fakes import FakeBackend
chain, me, count = ChainDir(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3])
status = chain.load_status()  # one copy for the whole loop, as a job holds it
for i in range(count):
    Executor(chain, FakeBackend()).apply(status, ev.HookRan({"name": f"{me}-{i}", "rc": 0}))
"""


def test_processes_saving_at_once_lose_nothing(tmp_path: Path) -> None:
    chain = _chain(tmp_path)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, str(chain.root), name, "40"], env=env)
        for name in ("submitter", "cancel", "relay")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    disk = _disk(chain)
    names = [h["name"] for h in disk.hooks]
    assert len(names) == 120 and disk.revision == 121
    for who in ("submitter", "cancel", "relay"):  # each process's own order kept
        assert [n for n in names if n.startswith(who)] == [f"{who}-{i}" for i in range(40)]
