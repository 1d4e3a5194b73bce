"""What a relay runner asks the scheduler (``chain.jobs.relay``): accounting
first where its lag cannot mislead (no slurmctld RPC), slurmctld where it can."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from fakes import FakeBackend

from chain import api
from chain.backends.base import JobInfo
from chain.core.model import ChainState, JobState
from chain.core.names import runner_job_name
from chain.core.runner_rules import LOOK_AHEAD, LOOK_FRESH
from chain.errors import SchedulerError
from chain.jobs.relay import Relay, TakeOver, Turn
from chain.modes.relay import RelayMode
from unit.jobs.test_relay import _ended, _relay, _relay_chain, _run_runner_one


class Accounting(FakeBackend):
    """The fake scheduler with accounting: ``acct`` is what sacct shows
    (None: no accounting); ``accounted_calls`` counts the asks."""

    def __init__(self) -> None:
        super().__init__()
        self.acct: dict[str, JobInfo] | None = {}
        self.accounted_calls = 0
        self.accounted_ids: list[list[str]] = []

    def accounted(self, job_ids: Sequence[str]) -> dict[str, JobInfo] | None:
        self.accounted_calls += 1
        self.accounted_ids.append(list(job_ids))
        if self.acct is None:
            return None
        return {j: self.acct[j] for j in job_ids if j in self.acct}


def _handed_over(tmp_path: Path, fake: Accounting, **extra: object) -> Turn:
    """Runner 1 recorded a handoff at 4; runner 2 takes over."""
    chain, _ = _relay_chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("4\n")
    _ended(chain, "101", 1, 99, 0, 4, **extra)
    fake.set_state("101", JobState.COMPLETED, 0)
    return _relay(tmp_path, chain, fake, "102", 2).take_over().step


def test_a_predecessor_accounting_shows_ended_is_judged_without_slurmctld(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = {"101": JobInfo("101", JobState.COMPLETED, exit_code=99)}
    assert _handed_over(tmp_path, fake) is Turn.RUN
    assert (fake.accounted_calls, fake.queries) == (1, 0)


@pytest.mark.parametrize(
    "shown",
    [
        None,  # not in accounting yet
        JobState.RUNNING,  # its end not there yet: lag
        JobState.COMPLETING,
        JobState.NODE_FAIL,  # Slurm may requeue it: slurmctld says whether it did
        JobState.PREEMPTED,
    ],
)
def test_a_predecessor_accounting_cannot_vouch_for_is_asked_of_slurmctld(
    tmp_path: Path, shown: JobState | None
) -> None:
    fake = Accounting()
    fake.acct = {} if shown is None else {"101": JobInfo("101", shown)}
    assert _handed_over(tmp_path, fake) is Turn.RUN
    assert fake.asked_exit_codes == [False]  # its record has the exit code


def test_without_accounting_the_predecessor_is_asked_of_slurmctld(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = None
    assert _handed_over(tmp_path, fake) is Turn.RUN
    assert fake.asked_exit_codes == [False]


def test_a_preempted_or_unrecorded_predecessor_is_never_judged_from_accounting(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = {"101": JobInfo("101", JobState.COMPLETED, exit_code=0)}
    _handed_over(tmp_path, fake, external_signal="TERM", preempted=True)
    assert fake.accounted_calls == 0 and fake.queries >= 1

    fake = Accounting()
    fake.acct = {"101": JobInfo("101", JobState.CANCELLED)}
    chain, _ = _relay_chain(tmp_path / "b", fake)
    fake.set_state("101", JobState.CANCELLED)  # no record: Slurm's account, with its exit code
    take = _relay(tmp_path / "b", chain, fake, "102", 2).take_over()
    assert take.step is Turn.END and fake.accounted_calls == 0 and fake.asked_exit_codes == [True]


@pytest.mark.parametrize(
    ("acct", "step", "queries"),
    [
        ({"102": JobInfo("102", JobState.CANCELLED)}, Turn.END, 0),  # the user's scancel, from accounting
        ({"102": JobInfo("102", JobState.PENDING)}, Turn.LEAVE, 0),  # queued: left to judge
        (None, Turn.LEAVE, 1),  # no accounting: slurmctld, which shows it pending
        ({}, Turn.LEAVE, 1),  # not in accounting: slurmctld
    ],
)
def test_the_handoff_asks_accounting_whether_the_successor_was_scancelled(
    tmp_path: Path, acct: dict[str, JobInfo] | None, step: Turn, queries: int
) -> None:
    fake = Accounting()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    fake.acct = acct
    before = fake.queries
    take = relay.after_app(_ended(chain, "101", 1, 99, 0, 4))
    assert take.step is step and fake.queries - before == queries
    if step is Turn.END:
        assert take.state is ChainState.CANCELLED


def _starting(tmp_path: Path, fake: Accounting) -> Relay:
    """Runner 2 as ``jobs.runner.run_relay`` starts it: one look at
    accounting, handed to its relay."""
    chain, _ = _relay_chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("4\n")
    _ended(chain, "101", 1, 99, 0, 4)
    fake.set_state("101", JobState.COMPLETED, 0)
    known = RelayMode().runner_look(chain, fake, "102", 2)()
    relay = _relay(tmp_path, chain, fake, "102", 2)
    relay.known = known
    return relay


def test_a_runner_asks_accounting_once_for_its_own_end_and_its_predecessor(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = {
        "101": JobInfo("101", JobState.COMPLETED, exit_code=99),
        "102": JobInfo("102", JobState.RUNNING, start=1000.0, end=1900.0),
    }
    relay = _starting(tmp_path, fake)
    assert relay.known is not None and relay.known["102"].end == 1900.0
    assert relay.take_over().step is Turn.RUN
    assert fake.accounted_ids == [["102", "101"]] and fake.queries == 0


def test_a_predecessor_missing_from_the_first_look_is_looked_up_again(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = {"102": JobInfo("102", JobState.RUNNING)}  # the predecessor's end not in accounting yet
    relay = _starting(tmp_path, fake)
    fake.acct["101"] = JobInfo("101", JobState.COMPLETED, exit_code=99)
    assert relay.take_over().step is Turn.RUN
    assert fake.accounted_ids == [["102", "101"], ["101"]] and fake.queries == 0


def test_a_first_look_that_shows_the_predecessor_running_goes_to_slurmctld(tmp_path: Path) -> None:
    fake = Accounting()
    fake.acct = {"101": JobInfo("101", JobState.RUNNING)}  # lag: its end not recorded yet
    relay = _starting(tmp_path, fake)
    assert relay.take_over().step is Turn.RUN
    assert fake.accounted_calls == 1 and fake.asked_exit_codes == [False]


def test_the_first_look_names_only_this_job_when_it_judges_no_predecessor(tmp_path: Path) -> None:
    """Runner 1 of a fresh chain (the submission judged nothing to hand it),
    and a job that is not the queued next runner."""
    fake = Accounting()
    chain, _ = _relay_chain(tmp_path, fake)
    assert RelayMode().runner_look(chain, fake, "101", 1)() == {}
    assert RelayMode().runner_look(chain, fake, "999", 7)() == {}
    assert fake.accounted_ids == [["101"], ["999"]]
    (chain.root / "state.json").write_text("{not json")
    assert RelayMode().runner_look(chain, fake, "101", 1)() == {} and fake.accounted_ids[-1] == ["101"]


@pytest.mark.parametrize(
    ("shown", "scheduler_asks"),
    [
        (JobInfo("101", JobState.RUNNING, start=1000.0, end=4e9), 0),  # accounting knows its end
        (JobInfo("101", JobState.PENDING), 1),  # its start not in accounting yet: slurmctld
        (None, 1),  # not in accounting at all
    ],
)
def test_a_runner_asks_accounting_for_its_own_end_once_then_the_scheduler(
    tmp_path: Path, shown: JobInfo | None, scheduler_asks: int
) -> None:
    """As its job runs it: the first look's answer, else straight to the
    scheduler (``end_time`` would ask accounting a second time)."""
    fake = Accounting()
    fake.acct = {} if shown is None else {"101": shown}
    fake.job_end = 3e9
    _, record = _run_runner_one(tmp_path, fake)
    assert sum("101" in ids for ids in fake.accounted_ids) == 1
    assert fake.end_time_calls == scheduler_asks
    assert record.slurm_end == (4e9 if scheduler_asks == 0 else 3e9)


class EagerAccounting(Accounting):
    """Accounting whose ``accounted_later`` asks at once, as sacct started
    in the background does: its answer is what accounting showed then
    (``later_ids``: what was asked that way)."""

    def __init__(self) -> None:
        super().__init__()
        self.later_ids: list[list[str]] = []

    def accounted_later(self, job_ids: Sequence[str]) -> Callable[[], dict[str, JobInfo] | None]:
        self.later_ids.append(list(job_ids))
        answer = self.accounted(job_ids)
        return lambda: answer


def _cancel(fake: EagerAccounting, job: str) -> None:
    """The user's scancel of ``job``, as slurmctld and accounting show it."""
    fake.cancel(job)
    fake.acct = {job: JobInfo(job, JobState.CANCELLED)}


def _beside_app(
    tmp_path: Path, fake: EagerAccounting, *, looked: float, ended: float, cancelled_before: bool = False
) -> Turn:
    """Runner 1 (successor 102 queued) takes over; accounting is asked about
    102 beside its app at ``looked``; the user's scancel of 102 comes after
    that look (``cancelled_before``: before it); after_app runs at ``ended``."""
    chain, _ = _relay_chain(tmp_path, fake)
    now = [0.0]
    relay = replace(_relay(tmp_path, chain, fake, "101", 1), clock=lambda: now[0])
    take = relay.take_over()
    due = relay.due_beside_app(take, stop_at=looked + LOOK_AHEAD)
    assert due is not None and due.at == looked
    fake.acct = {"102": JobInfo("102", JobState.PENDING)}
    if cancelled_before:
        _cancel(fake, "102")
    now[0] = looked
    due.act(looked + LOOK_AHEAD)
    _cancel(fake, "102")
    now[0] = ended
    return relay.after_app(_ended(chain, "101", 1, 99, 0, 4)).step


def test_the_successor_asked_about_beside_the_app_is_not_asked_about_again(tmp_path: Path) -> None:
    """The check after the app takes the answer asked shortly before the
    stop signal: the job does not wait for slurmdbd after its app. A cancel
    after that look is the race a look at the app's end has too."""
    fake = EagerAccounting()
    assert _beside_app(tmp_path, fake, looked=100.0, ended=100.0 + LOOK_FRESH) is Turn.LEAVE
    assert fake.accounted_ids.count(["102"]) == 1


def test_a_cancel_before_the_look_ends_the_chain_cancelled_from_that_answer(tmp_path: Path) -> None:
    fake = EagerAccounting()
    assert _beside_app(tmp_path, fake, looked=100.0, ended=101.0, cancelled_before=True) is Turn.END
    assert fake.accounted_ids.count(["102"]) == 1 and fake.queries == 0


def test_a_look_at_another_job_is_not_taken_for_the_successor(tmp_path: Path) -> None:
    """The queued successor is not the job looked at beside the app (queued
    anew meanwhile): accounting is asked about it, not the scheduler."""
    fake = EagerAccounting()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    relay.look_at_successor("99")
    _cancel(fake, "102")
    assert relay.after_app(_ended(chain, "101", 1, 99, 0, 4)).step is Turn.END
    assert fake.accounted_ids.count(["102"]) == 1 and fake.queries == 0


def test_a_handing_over_runner_asks_about_its_successor_while_its_app_runs(tmp_path: Path) -> None:
    """Runner 1 as its job runs it (``jobs.runner.run``), its stop signal
    within ``LOOK_AHEAD`` of its start: accounting is asked about runner 2
    beside the app, and not again after it."""
    from chain.jobs import runner

    fake = EagerAccounting()
    chain, _ = _relay_chain(tmp_path, fake, runner_time="0:10", runner_margin=6)
    (tmp_path / "state_iter.txt").write_text("0\n")
    fake.acct = {"102": JobInfo("102", JobState.PENDING)}
    settings = replace(api.stored_settings(chain), app_cmd="sleep 0.3; echo 4 > state_iter.txt; exit 99")
    code = runner.run(chain, settings, fake, job_id="101", job_name=runner_job_name("x", 1), workdir=tmp_path)
    assert code == 99 and ["102"] in fake.later_ids
    assert fake.accounted_ids.count(["102"]) == 1


def test_an_answer_older_than_its_freshness_is_asked_again(tmp_path: Path) -> None:
    fake = EagerAccounting()
    assert _beside_app(tmp_path, fake, looked=100.0, ended=100.0 + LOOK_FRESH + 0.1) is Turn.END
    assert fake.accounted_ids.count(["102"]) == 2


def test_a_deferring_runner_queues_beside_its_app_and_looks_at_nothing(tmp_path: Path) -> None:
    fake = EagerAccounting()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    take = relay.take_over()
    deferred = relay.due_beside_app(replace(take, deferred_until=50.0), stop_at=100.0)
    assert deferred is not None and deferred.at == 50.0 and deferred.act == relay.queue_deferred
    assert relay.due_beside_app(TakeOver(Turn.RUN, None), stop_at=100.0) is None


def test_a_successor_id_accounting_refuses_is_not_looked_at_beside_the_app(tmp_path: Path) -> None:
    class Refusing(EagerAccounting):
        def accounted_later(self, job_ids: Sequence[str]) -> Callable[[], dict[str, JobInfo] | None]:
            raise SchedulerError(f"not a job id: {job_ids[0]!r}")

    fake = Refusing()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.look_at_successor("1;rm")
    assert relay.successor_look is None
