"""chain.api.cancelling: ``chain cancel`` cancels the jobs whatever the
chain directory lets it write. A read-only or immutable
``.chain/`` (or a file in it that is not chain's) costs the record of the
cancel, said in one line naming the file, never the cancel itself, and never
exit 70."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from _chains import make_chain
from _hostile import assert_refused, edit_json, link, run_cli, unwritable, victim
from fakes import FakeBackend, SteppingClock

from chain import api
from chain.backends.base import JobInfo, JobState
from chain.core.model import ChainState
from chain.core.records import RunnerRecord
from chain.effects.ending import mark_cancelled
from chain.effects.executor import Executor
from chain.errors import ChainError
from chain.store import ChainDir

pytestmark = pytest.mark.timeout(60)


def _live_chain(tmp_path: Path, fake: FakeBackend) -> Path:
    """A running chain whose submitter (job 101) and runner (job 102) are queued."""
    chain_dir: Path = make_chain(tmp_path, 1, ChainState.RUNNING)
    submitter = fake.submit(Path("s"), job_name="chain-abcdef.s0")
    runner = fake.submit(Path("r"), job_name="chain-abcdef.r2")
    edit_json(
        chain_dir / "state.json",
        submitter_job_id=submitter,
        runner_job_id=runner,
        runner_live=True,
        runner_seq=2,
    )
    return chain_dir


def test_an_unwritable_chain_directory_still_cancels_the_jobs(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain_dir = _live_chain(tmp_path, fake)
    with unwritable(chain_dir), pytest.raises(ChainError) as caught:
        api.cancel(chain_dir, backend=fake, wait=0)
    assert sorted(fake.cancelled) == ["101", "102"]
    message = str(caught.value)
    assert message.startswith("chain chain-abcdef: its jobs are cancelled, but chain could not ")
    assert f"leave the cancel mark in {chain_dir / 'cancel-requested'}: " in message
    assert "record the cancel in " in message and "\n" not in message
    assert ChainDir(chain_dir).load_status().state is ChainState.RUNNING  # type: ignore[union-attr]  # not recorded


def test_an_unwritable_chain_directory_is_one_line_from_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    with unwritable(chain_dir):
        result = run_cli(tmp_path, monkeypatch, ["cancel"])
    assert_refused(result, f"; nor record the cancel in {chain_dir / 'state.json'}: ", code=1)
    assert "its jobs are cancelled" in result.stderr


def test_a_linked_runners_log_costs_the_record_not_the_cancel(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain_dir = _live_chain(tmp_path, fake)
    target = victim(tmp_path)
    link(chain_dir / "runners.jsonl", target)
    with pytest.raises(ChainError, match="record the cancel: .*runners.jsonl is a symbolic link"):
        api.cancel(chain_dir, backend=fake, wait=0)
    assert sorted(fake.cancelled) == ["101", "102"]
    assert target.read_text() == "precious\n"


def test_a_writable_chain_is_cancelled_and_recorded(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain_dir = _live_chain(tmp_path, fake)
    assert api.cancel(chain_dir, backend=fake, wait=0) == "chain chain-abcdef cancelled"
    chain = ChainDir(chain_dir)
    assert chain.load_status().state is ChainState.CANCELLED  # type: ignore[union-attr]
    assert chain.cancel_requested() and chain.last_runner().job_id == "102"  # type: ignore[union-attr]


def test_cancel_writes_neither_through_a_linked_cancel_mark_nor_a_linked_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    mark, log = victim(tmp_path, "mark"), victim(tmp_path, "log")
    link(chain_dir / "cancel-requested", mark)
    link(chain_dir / "chain.log", log)
    result = run_cli(tmp_path, monkeypatch, ["cancel"])
    assert result.exit_code == 0, result.stderr
    assert mark.read_text() == log.read_text() == "precious\n"
    assert "chain.log is a symbolic link" in result.stderr and "Traceback" not in result.stderr
    assert ChainDir(chain_dir).load_status().state is ChainState.CANCELLED  # type: ignore[union-attr]


def test_a_cancel_records_the_counter_of_the_apps_checkpoint(tmp_path: Path) -> None:
    """The app checkpointed past what the chain last recorded before it was
    cancelled: state.json keeps the checkpoint's counter (status showed the
    stale one)."""
    chain_dir = _live_chain(tmp_path, FakeBackend())
    (tmp_path / "state_iter.txt").write_text("99037\n")
    api.cancel(chain_dir, backend=FakeBackend(), wait=0)
    final = ChainDir(chain_dir).load_status()
    assert final is not None and final.state is ChainState.CANCELLED
    assert final.iteration == 99037


def test_a_cancel_records_a_counter_cmds_counter_from_the_runners_record_and_runs_no_program(
    tmp_path: Path,
) -> None:
    """A --counter-cmd chain: the cancelled runner read the counter at its
    end (its record); the cancel keeps that, and runs the program no more."""
    fake = FakeBackend()
    chain_dir = _live_chain(tmp_path, fake)
    edit_json(chain_dir / "settings.json", counter_cmd=f"touch {tmp_path / 'ran'}; echo 5")
    ChainDir(chain_dir).write_runner_record(RunnerRecord("102", iter_before=99010, iter_after=99055))
    api.cancel(chain_dir, backend=fake, wait=0)
    final = ChainDir(chain_dir).load_status()
    assert final is not None and final.state is ChainState.CANCELLED
    assert final.iteration == 99055
    assert not (tmp_path / "ran").exists()


def test_a_cancel_of_an_ended_chain_leaves_its_counter(tmp_path: Path) -> None:
    """Ended meanwhile (its submitter saw the end first): the end stands, as it was recorded."""
    chain_dir = make_chain(tmp_path, 1, ChainState.COMPLETED)
    (tmp_path / "state_iter.txt").write_text("99099\n")
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    mark_cancelled(Executor(chain, FakeBackend()), status, "late", settings=api.stored_settings(chain))
    final = chain.load_status()
    assert final is not None and final.state is ChainState.COMPLETED and final.iteration == 99010


class _SlowToStop(FakeBackend):
    """A cancelled job named in ``slow`` stays running for ``stop_after``
    seconds of ``clock`` (its app checkpointing on the signal); others end at once."""

    def __init__(self, clock: SteppingClock, stop_after: float) -> None:
        super().__init__()
        self.clock, self.stop_after = clock, stop_after
        self.slow: set[str] = set()
        self.stops: dict[str, float] = {}

    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        self.cancelled.append(job_id)
        self.stops[job_id] = self.clock.now + (self.stop_after if job_id in self.slow else 0)

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        for job, at in self.stops.items():
            if self.clock.now >= at:
                self.set_state(job, JobState.CANCELLED)
        return super().query(job_ids, exit_codes=exit_codes)


def test_cancel_returns_only_once_a_successor_the_record_calls_queued_has_stopped(tmp_path: Path) -> None:
    """A relay chain whose successor (job 103) has just started while the
    record still calls it queued: the cancel waits for it too, so a resume
    right after it finds nothing running (a sweep's cancel then resume)."""
    clock = SteppingClock()
    fake = _SlowToStop(clock, stop_after=12)
    chain_dir = _live_chain(tmp_path, fake)
    successor = fake.submit(Path("r"), job_name="chain-abcdef.r3")
    fake.set_state(successor, JobState.RUNNING)
    fake.slow.add(successor)
    edit_json(chain_dir / "state.json", next_job_id=successor)
    api.cancel(chain_dir, backend=fake, wait=60, clock=clock, sleep=clock.sleep)
    assert successor in fake.cancelled
    assert not any(info.state.active for info in fake.query([successor, "102"]).values())
    assert 12 <= clock.now < 60


def test_a_chain_its_runner_completes_while_the_cancel_is_recorded_stays_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race CI met in docs/sweeps.md: the cancel looked (running), then
    the last runner saved the chain completed (without the chain's lock)
    before the cancel saved: the cancel says so, exit 0, and the end stands."""
    from chain.api import cancelling

    fake = FakeBackend()
    chain_dir = _live_chain(tmp_path, fake)
    real = mark_cancelled

    def completed_meanwhile(run: Executor, status: object, reason: str, *, settings: object) -> None:
        store = ChainDir(chain_dir)
        done = store.load_status()
        assert done is not None and done.state is ChainState.RUNNING
        done.state, done.reason, done.revision = ChainState.COMPLETED, "reached MAX_ITER=10", done.revision + 1
        store.save_status(done)
        real(run, status, reason, settings=settings)  # type: ignore[arg-type]

    monkeypatch.setattr(cancelling, "mark_cancelled", completed_meanwhile)
    assert api.cancel(chain_dir, backend=fake, wait=0) == "chain chain-abcdef already completed"
    assert sorted(fake.cancelled) == ["101", "102"]
    final = ChainDir(chain_dir).load_status()
    assert final is not None and final.state is ChainState.COMPLETED and final.reason == "reached MAX_ITER=10"
