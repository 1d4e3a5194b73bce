"""The Python API (``from chain import Chain``) over the shared fake backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeBackend

from chain import Chain
from chain.core.decision import Verdict
from chain.core.model import ChainState, JobState
from chain.errors import ChainDirError, ConfigError


def test_submit_open_status_wait_resume(tmp_path: Path) -> None:
    fake = FakeBackend()
    run = Chain.submit(
        tmp_path / "lr1", app_cmd="true", max_iter=10, runner_time="10:00", backend=fake, hooks=["echo done"]
    )
    assert run.chain_dir == (tmp_path / "lr1" / ".chain").resolve() and run.chain_id.startswith("chain-")
    assert [name.rsplit(".", 1)[1] for name, _ in fake.submitted] == ["r1", "s0"]
    assert Chain.open(tmp_path / "lr1", backend=fake).chain_id == run.chain_id  # a working directory
    assert Chain.open(run.chain_dir).chain_id == run.chain_id  # or the chain directory itself
    report = run.status()
    assert report.state is ChainState.PENDING and report.max_iter == 10

    now = [0.0]
    with pytest.raises(Exception, match="still pending after 30s"):
        run.wait(timeout=30, poll=10, sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0])

    from chain.store import ChainDir

    store = ChainDir(run.chain_dir)
    status = store.load_status()
    assert status is not None
    status.state, status.reason = ChainState.STOPPED, "no progress"
    store.save_status(status)
    for job in list(fake.states):  # its jobs left as it ended
        fake.set_state(job, JobState.COMPLETED)
    assert run.wait(sleep=lambda s: pytest.fail("waited")).state is ChainState.STOPPED

    run.resume(max_iter=20)
    assert run.status().max_iter == 20 and run.status().submitter_cycle == 1


def test_bad_settings_are_chain_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'max_iters'"):
        Chain.submit(tmp_path, app_cmd="true", max_iters=10, backend=FakeBackend())
    with pytest.raises(ConfigError, match="--max-iter must be at least 1"):
        Chain.submit(tmp_path, app_cmd="true", max_iter=0, backend=FakeBackend())
    with pytest.raises(ChainDirError, match="no chain in"):
        Chain.open(tmp_path / "nothing")


def test_the_failure_block_names_the_runner_by_its_number(tmp_path: Path) -> None:
    """Runner 2 is job 103: the failure record carries both,
    in the report and in its JSON."""
    fake = FakeBackend()
    run = Chain.submit(tmp_path, app_cmd="true", max_iter=10, runner_time="10:00", backend=fake)
    from chain.store import ChainDir, JudgedRunner

    store = ChainDir(run.chain_dir)
    store.append_runner(JudgedRunner(job_id="103", seq=2, state=JobState.COMPLETED, verdict=Verdict.STOP, reason="x"))
    status = store.load_status()
    assert status is not None
    status.state = ChainState.STOPPED
    store.save_status(status)
    report = run.status()
    assert report.failure is not None and (report.failure.job_id, report.failure.seq) == ("103", 2)
    assert report.to_json()["failure"]["seq"] == 2


def test_backend_is_the_setting_as_a_string_and_used_as_it_is_as_an_object(tmp_path: Path) -> None:
    """One name for both (``scheduler=`` was the object's)."""
    with pytest.raises(ConfigError, match="backend"):
        Chain.submit(tmp_path / "a", app_cmd="true", max_iter=10, backend="nonsense")
    fake = FakeBackend()
    run = Chain.submit(tmp_path / "b", app_cmd="true", max_iter=10, runner_time="10:00", backend=fake)
    assert fake.submitted and run.status().state.value == "pending"


def test_wait_returns_once_the_jobs_that_ended_the_chain_have_left(tmp_path: Path) -> None:
    """The chain is completed while its submitter still runs (it exits after
    saving the end, and may still write in the chain directory): ``wait``
    returns once it has left, and gives up waiting for it after SETTLE_WAIT."""
    from fakes import SteppingClock

    from chain.api.status import SETTLE_WAIT
    from chain.store import ChainDir

    fake = FakeBackend()
    run = Chain.submit(tmp_path, app_cmd="true", max_iter=10, backend=fake)
    store = ChainDir(run.chain_dir)
    status = store.load_status()
    assert status is not None
    status.state = ChainState.COMPLETED
    store.save_status(status)
    for job in list(fake.states):  # its runner ended; its submitter still exits
        fake.set_state(job, JobState.COMPLETED)
    fake.set_state(status.submitter_job_id, JobState.RUNNING)
    clock = SteppingClock()

    def leaves_at_3s(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now >= 3:
            fake.set_state(status.submitter_job_id, JobState.COMPLETED)

    assert run.wait(poll=1, sleep=leaves_at_3s, clock=clock).state is ChainState.COMPLETED
    assert 3 <= clock.now < 4

    fake.set_state(status.submitter_job_id, JobState.RUNNING)  # one that never leaves: not waited on for ever
    start = clock.now
    run.wait(poll=1, sleep=clock.sleep, clock=clock)
    assert SETTLE_WAIT <= clock.now - start < SETTLE_WAIT + 1
