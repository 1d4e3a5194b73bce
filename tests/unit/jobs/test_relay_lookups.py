"""What a relay runner asks the scheduler (``chain.jobs.relay``): accounting
first where its lag cannot mislead (no slurmctld RPC), slurmctld where it can."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import FakeBackend

from chain.backends.base import JobInfo
from chain.core.model import ChainState, JobState
from chain.jobs.relay import Turn
from unit.jobs.test_relay import _ended, _relay, _relay_chain


class Accounting(FakeBackend):
    """The fake scheduler with accounting: ``acct`` is what sacct shows
    (None: no accounting); ``accounted_calls`` counts the asks."""

    def __init__(self) -> None:
        super().__init__()
        self.acct: dict[str, JobInfo] | None = {}
        self.accounted_calls = 0

    def accounted(self, job_ids: Sequence[str]) -> dict[str, JobInfo] | None:
        self.accounted_calls += 1
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
