"""chain submit --resume of an ended chain resets what the next run must redo
(found by the fault suite: the report hook of a failed run counted as the
completion's, so analytics never ran at completion after a resume)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend, SteppingClock

from chain import api
from chain.backends.base import JobInfo
from chain.core.model import ChainState, JobState
from chain.errors import ChainDirError
from chain.modes.common import refuse_live_submitter
from chain.store import ChainDir


@pytest.mark.parametrize("ended", ["failed", "stopped", "cancelled"])
def test_resume_of_ended_chain_forgets_its_hooks(tmp_path: Path, ended: str) -> None:
    fake = FakeBackend()
    flags = {"app_cmd": "true", "max_iter": 10}
    chain_dir = tmp_path / ".chain"
    api.submit(flags, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, backend=fake)
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.state = ChainState(ended)
    status.retries_used = 2
    status.hooks = [{"name": "report", "rc": 0}]
    chain.save_status(status)
    fake.set_state(status.submitter_job_id, JobState.COMPLETED)  # that submitter has ended

    api.submit({}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, resume=True, backend=fake)
    resumed = chain.load_status()
    assert resumed is not None
    assert resumed.state is ChainState.PENDING
    assert resumed.hooks == [], "the ended run's report hook must run again at completion"
    assert resumed.retries_used == 0


def test_resume_after_crashed_submitter_keeps_hooks_run(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain_dir = tmp_path / ".chain"
    api.submit(
        {"app_cmd": "true", "max_iter": 10}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, backend=fake
    )
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.state = ChainState.RUNNING  # the submitter died mid-hooks
    status.hooks = [{"name": "report", "rc": 0}]
    chain.save_status(status)
    fake.set_state(status.submitter_job_id, JobState.COMPLETED)  # that submitter has ended
    api.submit({}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, resume=True, backend=fake)
    resumed = chain.load_status()
    assert resumed is not None and [h["name"] for h in resumed.hooks] == ["report"]


class FinishingBackend(FakeBackend):
    """The old submitter stays RUNNING for ``polls`` queries, then COMPLETED."""

    def __init__(self, polls: int) -> None:
        super().__init__()
        self.polls = polls

    def query(self, job_ids: Any, *, exit_codes: bool = True) -> dict[str, JobInfo]:
        from chain.core.model import JobState

        self.queries += 1
        state = JobState.RUNNING if self.queries <= self.polls else JobState.COMPLETED
        return {j: JobInfo(j, state) for j in job_ids}


def _ended_status(state: ChainState) -> Any:
    from chain.store import ChainStatus

    return ChainStatus(chain_id="c-1", state=state, submitter_job_id="41", submitter_cycle=3)


def test_resume_waits_for_an_ended_chains_submitter_to_finish_its_report() -> None:
    backend, clock, said = FinishingBackend(polls=3), SteppingClock(), list[str]()
    refuse_live_submitter(
        backend, _ended_status(ChainState.FAILED), wait=120, notify=said.append, sleep=clock.sleep, clock=clock
    )
    assert backend.queries == 4 and clock.slept == [2.0, 2.0, 2.0]
    assert said == ["waiting for submitter job 41 to finish the failed chain's report"]


def test_resume_gives_up_waiting_with_a_clear_error() -> None:
    backend, clock = FinishingBackend(polls=10**6), SteppingClock()
    with pytest.raises(
        ChainDirError,
        match=r"is stopped but its submitter \(job 41\) is still finishing "
        r"its report after 120s",
    ):
        refuse_live_submitter(backend, _ended_status(ChainState.STOPPED), wait=120, sleep=clock.sleep, clock=clock)
    assert clock.now == pytest.approx(120)


def test_resume_refuses_at_once_while_the_chain_is_driven() -> None:
    backend, clock = FinishingBackend(polls=1), SteppingClock()
    with pytest.raises(ChainDirError, match=r"still has an active submitter \(job 41\)"):
        refuse_live_submitter(backend, _ended_status(ChainState.RUNNING), wait=120, sleep=clock.sleep, clock=clock)
    assert clock.slept == []


def _ended_chain(tmp_path: Path, state: str = "stopped", **flags: Any) -> tuple[ChainDir, FakeBackend]:
    fake = FakeBackend()
    chain_dir = tmp_path / ".chain"
    api.submit(
        {"app_cmd": "true", "max_iter": 10, "runner_time": "10:00", **flags},
        {},
        config=None,
        chain_dir=chain_dir,
        workdir=tmp_path,
        backend=fake,
    )
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.state = ChainState(state)
    chain.save_status(status)
    fake.set_state(status.submitter_job_id, JobState.COMPLETED)  # that submitter has ended
    return chain, fake


def test_resume_keeps_stored_settings_against_a_changed_toml_and_environment(tmp_path: Path) -> None:
    """Only flags change a resumed chain; a differing chain.toml key or
    environment variable is listed, one line each, and not applied."""
    chain, fake = _ended_chain(tmp_path, partition="short")
    (tmp_path / "chain.toml").write_text('runner_time = "2:00:00"\ncheckpoint_every = 20\n')
    lines: list[str] = []
    api.submit(
        {"max_iter": "40"},
        {"MAX_ITER": "99", "CHAIN_PARTITION": "long", "CHAIN_RETRIES": "0"},
        config=None,
        chain_dir=chain.root,
        workdir=tmp_path,
        resume=True,
        notify=lines.append,
        backend=fake,
    )
    stored = api.stored_settings(chain)
    assert stored.max_iter == 40  # the flag
    assert stored.partition == "short" and stored.runner_time == "10:00"  # not the env, not the file
    unapplied = [line for line in lines if line.startswith("not applied on resume")]
    assert len(unapplied) == 2, lines  # CHAIN_PARTITION and runner_time; MAX_ITER lost to the flag,
    assert any("CHAIN_PARTITION" in line and "--partition" in line for line in unapplied)  # retries same
    assert any("runner_time" in line and "--runner-time" in line for line in unapplied)
    assert "#SBATCH --partition=short" in (chain.scripts / "runner.sbatch").read_text()


def test_a_completed_chain_says_how_to_extend_or_start_anew(tmp_path: Path) -> None:
    chain, fake = _ended_chain(tmp_path, state="completed")
    with pytest.raises(ChainDirError) as plain:
        api.submit({"app_cmd": "true"}, {}, config=None, chain_dir=chain.root, workdir=tmp_path, backend=fake)
    assert "--resume --max-iter" in str(plain.value) and "--new" in str(plain.value)
    with pytest.raises(ChainDirError, match="--resume --max-iter"):  # the environment does not extend it
        api.submit(
            {}, {"MAX_ITER": "50"}, config=None, chain_dir=chain.root, workdir=tmp_path, resume=True, backend=fake
        )
    old_id = chain.load_status().chain_id  # type: ignore[union-attr]
    lines: list[str] = []
    new = api.submit(
        {"app_cmd": "true", "max_iter": 5},
        {},
        config=None,
        chain_dir=chain.root,
        workdir=tmp_path,
        new=True,
        notify=lines.append,
        backend=fake,
    )
    kept = tmp_path / f".chain.{old_id}"
    assert new.chain_id != old_id and (kept / "state.json").is_file()
    assert ChainDir(kept).load_status().state is ChainState.COMPLETED  # type: ignore[union-attr]
    assert chain.load_status().state is ChainState.PENDING  # type: ignore[union-attr]
    assert any(str(kept) in line for line in lines)


def test_new_refuses_an_active_chain(tmp_path: Path) -> None:
    chain, fake = _ended_chain(tmp_path, state="running")
    with pytest.raises(ChainDirError, match="active chain"):
        api.submit({"app_cmd": "true"}, {}, config=None, chain_dir=chain.root, workdir=tmp_path, new=True, backend=fake)
    assert not list(tmp_path.glob(".chain.*"))


class SlowToEnd(FakeBackend):
    """scancel asks; the jobs end only when the test says so."""

    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        self.cancelled.append(job_id)


def test_a_resume_while_chain_cancel_waits_for_the_jobs_is_refused(tmp_path: Path) -> None:
    """chain cancel releases the chain's lock while its jobs end; a resume in
    that gap (found by the fault suite's racing commands) queued a submitter
    that the cancel then marked cancelled: both said yes, the chain ended."""
    fake = SlowToEnd()
    chain_dir = tmp_path / ".chain"
    api.submit(
        {"app_cmd": "true", "max_iter": 10}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, backend=fake
    )
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.state = ChainState.RUNNING
    chain.save_status(status)
    jobs = sorted(fake.states)
    for job in jobs:
        fake.set_state(job, JobState.RUNNING)
    refusals: list[str] = []

    def resume_meanwhile(seconds: float) -> None:
        with pytest.raises(ChainDirError) as caught:
            api.submit({}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, resume=True, backend=fake)
        refusals.append(str(caught.value))
        for job in jobs:
            fake.set_state(job, JobState.CANCELLED)

    submitted = len(fake.submitted)
    api.cancel(chain_dir, backend=fake, sleep=resume_meanwhile)
    assert refusals and "is being cancelled: resume it once chain cancel has ended" in refusals[0]
    assert len(fake.submitted) == submitted, "the refused resume queued nothing"
    after = chain.load_status()
    assert after is not None and after.state is ChainState.CANCELLED
    # once the cancel is done, a resume goes on
    api.submit({}, {}, config=None, chain_dir=chain_dir, workdir=tmp_path, resume=True, backend=fake)
    resumed = chain.load_status()
    assert resumed is not None and resumed.state is ChainState.PENDING
    assert not chain.cancel_file.exists()
