"""What the submitter's watch asks (``chain.jobs.watch``): accounting
(slurmdbd, no slurmctld RPC) where its lag cannot mislead, slurmctld where
it can: a sweep's submitters otherwise asked slurmctld ~7 times a chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import SteppingClock

from chain import api
from chain.backends.base import JobInfo
from chain.core.model import JobState
from chain.core.poll import PollPolicy, StepAside
from chain.core.records import RunnerPhase, RunnerRecord
from chain.jobs.watch import HandOver, RunnerWatch, StepAsideNow
from chain.store import ChainDir, ChainStatus
from unit.jobs.test_relay_lookups import Accounting

T0 = 1000.0


def _watch(tmp_path: Path, fake: Accounting, **kwargs: Any) -> tuple[RunnerWatch, ChainStatus, SteppingClock]:
    """Runner 1 (job 7) of a chain, watched by a submitter at T0."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10}, {}, None, tmp_path)
    status = ChainStatus(chain_id="c-1", workdir=str(tmp_path), runner_seq=1, runner_job_id="7", runner_live=True)
    chain.save_status(status)
    clock = SteppingClock(T0)
    watch = RunnerWatch(chain, fake, tmp_path / settings.ckpt_path, PollPolicy(), clock.clock, clock.sleep, **kwargs)
    return watch, status, clock


def _record(watch: RunnerWatch, phase: RunnerPhase, **extra: Any) -> None:
    watch.chain.write_runner_record(RunnerRecord("7", "c-1.r1", seq=1, status=phase, start=T0, **extra))


def test_a_runner_that_died_unrecorded_is_judged_from_accounting(tmp_path: Path) -> None:
    fake = Accounting()
    watch, status, _ = _watch(tmp_path, fake)
    _record(watch, RunnerPhase.RUNNING, end_planned=T0 + 3600)
    fake.set_state("7", JobState.RUNNING)  # slurmctld would say the same: it must not be asked
    fake.acct = {"7": JobInfo("7", JobState.OUT_OF_MEMORY, exit_code=0, source="sacct")}
    outcome = watch.outcome_of(status)
    assert outcome.slurm_state is JobState.OUT_OF_MEMORY and not outcome.recorded
    assert fake.queries == 0 and fake.accounted_calls == 1


def test_a_running_runner_is_looked_at_in_accounting_until_its_planned_end(tmp_path: Path) -> None:
    fake = Accounting()
    watch, status, clock = _watch(tmp_path, fake, deadline=T0 + 200)
    _record(watch, RunnerPhase.RUNNING, end_planned=T0 + 100)
    fake.acct = {"7": JobInfo("7", JobState.RUNNING, source="sacct")}  # lags, or true: the same until the end
    fake.set_state("7", JobState.RUNNING)
    with pytest.raises(HandOver):
        watch.outcome_of(status)  # no outcome: hands over at the deadline
    assert clock.now >= T0 + 200
    # before the planned end accounting only; past it slurmctld, whose word accounting's lag cannot fake
    assert fake.accounted_calls >= 3 and fake.queries >= 1


def test_past_its_planned_end_a_runner_shown_running_is_asked_of_slurmctld(tmp_path: Path) -> None:
    fake = Accounting()
    watch, status, _ = _watch(tmp_path, fake)
    _record(watch, RunnerPhase.RUNNING, end_planned=T0 - 5)
    fake.acct = {"7": JobInfo("7", JobState.RUNNING, source="sacct")}  # accounting lags an end
    fake.set_state("7", JobState.TIMEOUT, exit_code=0)
    outcome = watch.outcome_of(status)
    assert fake.queries == 1 and not outcome.recorded


@pytest.mark.parametrize("shown", [None, JobState.PENDING, JobState.RUNNING])
def test_a_runner_without_a_record_is_taken_as_accounting_shows_it_for_a_while(
    tmp_path: Path, shown: JobState | None
) -> None:
    """Accounting may show a job only once it starts; a runner writes its
    record first thing: no record and no end there is taken as it is for the
    longest poll interval, then slurmctld is asked."""
    fake = Accounting()
    watch, status, clock = _watch(tmp_path, fake, deadline=T0 + 1000)
    fake.acct = {} if shown is None else {"7": JobInfo("7", shown, source="sacct")}
    fake.set_state("7", JobState.FAILED, exit_code=1)  # slurmctld knows better: it died before its record
    outcome = watch.outcome_of(status)
    assert fake.queries == 1 and not outcome.recorded
    assert clock.now >= T0 + PollPolicy().slurm_max  # accounting was believed until then


def test_a_runner_this_submitter_just_queued_is_not_asked_about_until_it_may_step_aside(tmp_path: Path) -> None:
    fake = Accounting()
    watch, status, clock = _watch(tmp_path, fake, step_aside=StepAside(10.0), fresh_job="7")
    fake.set_state("7", JobState.PENDING)
    with pytest.raises(StepAsideNow):
        watch.outcome_of(status)
    assert clock.now == pytest.approx(T0 + 10.0, abs=0.5)  # pending from its sbatch: patience counted from then
    assert (fake.accounted_calls, fake.queries) == (1, 0)  # one look, at accounting


def test_a_runner_adopted_from_another_job_is_looked_at_at_once(tmp_path: Path) -> None:
    fake = Accounting()
    watch, status, _ = _watch(tmp_path, fake)
    fake.acct = {"7": JobInfo("7", JobState.CANCELLED, source="sacct")}  # long gone
    outcome = watch.outcome_of(status)
    assert outcome.slurm_state is JobState.CANCELLED and not outcome.recorded
    assert fake.accounted_calls == 1 and fake.queries == 0


def test_an_ended_runner_is_judged_from_accounting_and_left_queue_asks_slurmctld_once(tmp_path: Path) -> None:
    fake = Accounting()
    watch, status, clock = _watch(tmp_path, fake)
    _record(watch, RunnerPhase.ENDED, exit_code=99, iter_before=0, iter_after=4)
    fake.acct = {"7": JobInfo("7", JobState.RUNNING, source="sacct")}
    fake.set_state("7", JobState.COMPLETED, exit_code=99)

    def sleep(seconds: float) -> None:  # accounting shows the end after its lag
        clock.sleep(seconds)
        fake.acct = {"7": JobInfo("7", JobState.COMPLETED, exit_code=99, source="sacct")}

    watch.sleep = sleep
    outcome = watch.outcome_of(status)
    assert outcome.recorded and fake.queries == 0 and fake.accounted_calls == 2
    watch.left_queue()  # before the next runner is queued: out of slurmctld's queue too
    assert fake.queries == 1
    watch.left_queue()  # once
    assert fake.queries == 1


@pytest.mark.parametrize("shown", [JobState.PREEMPTED, JobState.NODE_FAIL])
def test_an_end_slurm_may_requeue_is_asked_of_slurmctld(tmp_path: Path, shown: JobState) -> None:
    fake = Accounting()
    watch, status, _ = _watch(tmp_path, fake)
    _record(watch, RunnerPhase.ENDED, exit_code=124, iter_before=0, iter_after=4)
    fake.acct = {"7": JobInfo("7", shown, source="sacct")}
    fake.set_state("7", JobState.COMPLETED, exit_code=0)
    watch.outcome_of(status)
    assert fake.queries >= 1 and not watch.leaving


def test_without_accounting_slurmctld_is_asked_as_before(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = None
    watch, status, _ = _watch(tmp_path, fake)
    _record(watch, RunnerPhase.ENDED, exit_code=0, iter_before=0, iter_after=10)
    fake.set_state("7", JobState.COMPLETED, exit_code=0)
    assert watch.outcome_of(status).recorded
    assert fake.queries == 1 and fake.accounted_calls == 1 and not watch.leaving


def test_a_long_runner_shown_running_by_accounting_is_confirmed_by_slurmctld_now_and_then(tmp_path: Path) -> None:
    """Accounting can fall far behind (slurmdbd draining a backlog): its
    RUNNING is not believed for hours on end."""
    fake = Accounting()
    watch, status, _ = _watch(tmp_path, fake, deadline=T0 + 4000)
    _record(watch, RunnerPhase.RUNNING, end_planned=T0 + 24 * 3600)
    fake.acct = {"7": JobInfo("7", JobState.RUNNING, source="sacct")}
    fake.set_state("7", JobState.RUNNING)
    with pytest.raises(HandOver):
        watch.outcome_of(status)
    # asks every 330 s for 4000 s: 13 looks, slurmctld's at the start's 1800 s and 3600 s only
    assert fake.queries == 2 and fake.accounted_calls >= 12


def test_an_accounting_that_refuses_the_job_id_leaves_it_to_slurmctld(tmp_path: Path) -> None:
    from chain.errors import SchedulerError

    class Refusing(Accounting):
        def accounted(self, job_ids: Any) -> dict[str, JobInfo] | None:
            raise SchedulerError("refusing job id")

    fake = Refusing()
    watch, status, _ = _watch(tmp_path, fake)
    _record(watch, RunnerPhase.ENDED, exit_code=0, iter_before=0, iter_after=10)
    fake.set_state("7", JobState.COMPLETED, exit_code=0)
    assert watch.outcome_of(status).recorded and fake.queries >= 1
