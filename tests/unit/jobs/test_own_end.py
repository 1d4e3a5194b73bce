"""A job's own end (``chain.jobs.own_end.OwnEnd``): accounting first and
again for a while (it shows a start late when many jobs start at once),
slurmctld once after that; the configured end holds meanwhile."""

from __future__ import annotations

from fakes import FakeBackend, SteppingClock

from chain.jobs.own_end import OwnEnd


class Ends(FakeBackend):
    """``acct_end``: what accounting shows of the job's end (None: not yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.acct_end: float | None = None
        self.acct_calls = 0

    def accounted_end(self, job_id: str) -> float | None:
        self.acct_calls += 1
        return self.acct_end


def test_accounting_that_shows_the_end_settles_it_without_slurmctld() -> None:
    fake, clock = Ends(), SteppingClock(100.0)
    fake.acct_end = 150.0
    own = OwnEnd(fake, "9", 160.0, clock.clock)
    assert own.settle() and own.end == 150.0 and own.settled
    assert (fake.acct_calls, fake.end_time_calls) == (1, 0)
    assert not own.settle() and fake.acct_calls == 1  # asked once


def test_accounting_is_asked_again_until_its_patience_then_slurmctld_once() -> None:
    fake, clock = Ends(), SteppingClock(100.0)
    fake.job_end = 155.0  # slurmctld's answer
    own = OwnEnd(fake, "9", 160.0, clock.clock, patience=10.0, retry_every=2.0)
    asked = []
    while not own.settled:
        own.settle()
        asked.append((clock.now, fake.acct_calls, fake.end_time_calls))
        clock.sleep(0.5)
    assert own.end == 155.0 and fake.end_time_calls == 1
    assert fake.acct_calls == 6  # at 100, 102, ... 110: not at every look
    assert asked[-1][0] >= 110.0


def test_accounting_shown_late_moves_the_end_earlier_only() -> None:
    fake, clock = Ends(), SteppingClock(100.0)
    own = OwnEnd(fake, "9", 160.0, clock.clock)
    assert not own.settle() and own.end == 160.0 and not own.settled  # the configured end meanwhile
    clock.sleep(2.0)
    fake.acct_end = 170.0  # a longer limit than configured: the configured end stands
    assert not own.settle() and own.settled and own.end == 160.0


def test_cheap_queries_ask_the_backend_at_once() -> None:
    fake, clock = Ends(), SteppingClock(100.0)
    fake.cheap_queries = True
    fake.job_end = 130.0
    own = OwnEnd(fake, "9", 160.0, clock.clock)
    assert own.settle() and own.end == 130.0
    assert (fake.acct_calls, fake.end_time_calls) == (0, 1)


def test_no_answer_anywhere_keeps_the_configured_end() -> None:
    fake, clock = Ends(), SteppingClock(100.0)
    own = OwnEnd(fake, "9", 160.0, clock.clock, patience=0.0)
    assert not own.settle() and own.settled and own.end == 160.0 and fake.end_time_calls == 1
