"""Submitter mode in a full cluster (issue 29): a submitter whose runner
still waits for resources after ``step_aside_after`` seconds hands over to a
successor that Slurm starts with the runner (``afterany:<self>,after:<runner>``),
so no submitter holds a slot its own runner waits for. Injected clocks: no
test sleeps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import FakeBackend, SteppingClock

from chain import api
from chain.backends.base import JobInfo
from chain.core.model import ChainState, JobState
from chain.core.poll import StepAside
from chain.jobs.submitter import Submitter
from chain.store import ChainDir, ChainStatus


@pytest.mark.parametrize(("patience", "since", "now", "due"), [
    (60.0, 100.0, 159.0, False), (60.0, 100.0, 160.0, True), (60.0, None, 1e9, False), (0.0, 100.0, 1e9, False),
])
def test_the_policy_is_due_after_its_patience_of_pending(patience: float, since: float | None, now: float,
                                                          due: bool) -> None:
    assert StepAside(patience).due(since, now) is due


def test_the_policy_asks_the_scheduler_no_later_than_it_is_due() -> None:
    assert StepAside(60.0).next_query(100.0, planned=430.0) == 160.0
    assert StepAside(60.0).next_query(100.0, planned=120.0) == 120.0
    assert StepAside(60.0).next_query(None, planned=430.0) == 430.0
    assert StepAside(0.0).next_query(100.0, planned=430.0) == 430.0


def _submitter(tmp_path: Path, backend: FakeBackend, clock: SteppingClock, **flags: object) -> tuple[ChainDir, Submitter]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    chain.save_status(ChainStatus(chain_id="c-1", workdir=str(tmp_path), state=ChainState.PENDING,
                                  submitter_job_id="5"))
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10, **flags}, {}, None, tmp_path)
    return chain, Submitter(chain, settings, backend, tmp_path, "5", clock=clock, sleep=clock.sleep)


def test_a_submitter_whose_runner_stays_pending_steps_aside(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), SteppingClock(1000.0)
    chain, submitter = _submitter(tmp_path, backend, clock, step_aside_after=60)
    assert submitter.run() == 0  # its job ends: the slot is free for the runner
    runner, successor = backend.submitted
    assert runner == ("c-1.r1", None)
    assert successor == ("c-1.s1", "afterany:5,after:101")  # starts when runner 101 does (or is cancelled)
    assert 1060.0 <= clock.now < 1062.0  # 60 s of PENDING, asked no later than that
    status = chain.load_status()
    assert status is not None and status.runner_live and status.runner_job_id == "101"
    assert status.submitter_job_id == "102" and status.submitter_cycle == 1 and not status.state.ended
    assert "steps aside: runner job 101 still waits for resources after 60s" in chain.log_file.read_text()


class StartsAt(FakeBackend):
    """The runner (job 101) starts at a given time."""

    def __init__(self, clock: SteppingClock, at: float) -> None:
        super().__init__()
        self.clock, self.at = clock, at

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        if self.clock.now >= self.at and self.states.get("101", None) is not None \
                and self.states["101"].state is JobState.PENDING:
            self.set_state("101", JobState.RUNNING)
        return super().query(job_ids, exit_codes=exit_codes)


def test_a_running_runner_keeps_its_submitter(tmp_path: Path) -> None:
    """Started within the patience: the submitter stays and waits, as the seed's does."""
    clock = SteppingClock(1000.0)
    backend = StartsAt(clock, 1030.0)  # resources came after 30 s
    _, submitter = _submitter(tmp_path, backend, clock, step_aside_after=60, submitter_time="10:00",
                              submitter_margin="60")
    submitter.run()  # hands over at its own margin instead, 9 minutes on
    _, successor = backend.submitted
    assert successor == ("c-1.s1", "afterany:5")
    assert clock.now >= 1000.0 + 540.0


def test_zero_never_steps_aside(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), SteppingClock(1000.0)
    _, submitter = _submitter(tmp_path, backend, clock, step_aside_after=0, submitter_time="10:00",
                              submitter_margin="60")
    submitter.run()
    assert backend.submitted[-1] == ("c-1.s1", "afterany:5") and clock.now >= 1540.0
