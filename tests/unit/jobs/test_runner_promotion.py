"""Promotion (``core.runner_rules.promotion_give_up`` and the runner's wait
for it): a runner pre-queued by lookahead waits to be promoted at most
its patience and never past its own end less its margin; a runner that
gives up is judged as one that ran no app (not a timeout: no margin raised,
no runner without progress counted). Clocks are injected: no real sleeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeBackend, SteppingClock

from chain import api
from chain.backends.base import JobState
from chain.core.decision import Policy, Tally, Verdict, decide
from chain.core.model import ChainState
from chain.core.runner_rules import promotion_give_up
from chain.core.settings import Settings
from chain.effects.ending import record_judgment
from chain.effects.executor import Executor
from chain.jobs import runner
from chain.jobs.runner import PROMOTION_PATIENCE
from chain.jobs.submitter import Submitter
from chain.jobs.watch import RunnerWatch
from chain.store import ChainDir, ChainStatus

T0 = 1_000_000.0  # the runner's start on the fake clock


class EndingBackend(FakeBackend):
    """A fake scheduler that tells the job's end (None: it does not know)."""

    def __init__(self, end: float | None) -> None:
        super().__init__()
        self.end = end

    def scheduler_end(self, job_id: str) -> float | None:
        return self.end


def _chain(
    tmp_path: Path, *, margin: int = 0, runner_time: str = "1:30", runner_margin: int = 10
) -> tuple[ChainDir, Settings]:
    """Runner 1 (job 101) computes; runner 2 (job 102) is queued behind it."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings(
        {
            "app_cmd": f"touch {tmp_path / 'ran'}",
            "max_iter": 10,
            "lookahead": True,
            "runner_time": runner_time,
            "runner_margin": runner_margin,
        },
        {},
        None,
        tmp_path,
    )
    chain.save_status(
        ChainStatus(
            chain_id="c-1",
            workdir=str(tmp_path),
            state=ChainState.RUNNING,
            runner_seq=1,
            runner_job_id="101",
            runner_live=True,
            next_job_id="102",
            iter_before=0,
            margin=margin,
        )
    )
    (tmp_path / "state_iter.txt").write_text("4\n")
    return chain, settings


def _wait_unpromoted(tmp_path: Path, chain: ChainDir, settings: Settings, end: float | None) -> float:
    """Runner 2 starts at T0 and is never promoted: how long it waited."""
    fake = SteppingClock(T0, min_step=1.0)  # by whole seconds: its 0.1 s polls
    code = runner.run(
        chain,
        settings,
        EndingBackend(end),
        job_id="102",
        job_name="c-1.r2",
        workdir=tmp_path,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert code == 0 and not (tmp_path / "ran").exists(), "it ran the app without being promoted"
    record = chain.runner_record("102")
    assert record is not None and record.ended and record.superseded and "not promoted" in record.detail
    return fake.now - T0


def test_the_give_up_time_is_the_patience_or_the_own_end_less_the_margin() -> None:
    assert promotion_give_up(100.0, 120.0, 100.0 + 90, 10) == 100.0 + 80
    assert promotion_give_up(100.0, 120.0, 100.0 + 3600, 10) == 100.0 + 120
    assert promotion_give_up(100.0, 120.0, 100.0 + 5, 10) == 95.0  # past already: leave at once


@pytest.mark.parametrize(
    ("end", "waited"),
    [
        (T0 + 90, 80),  # a 1:30 runner, margin 10 s: it leaves 10 s before Slurm would kill it
        (T0 + 3600, PROMOTION_PATIENCE),  # a long runner: the patience
        (None, 80),  # the scheduler did not tell: the configured 1:30 from its start
    ],
)
def test_a_prequeued_runner_waits_at_most_min_of_patience_and_own_end_less_margin(
    tmp_path: Path, end: float | None, waited: float
) -> None:
    chain, settings = _chain(tmp_path)
    assert _wait_unpromoted(tmp_path, chain, settings, end) == pytest.approx(waited, abs=1)


def test_the_learned_margin_bounds_the_wait_too(tmp_path: Path) -> None:
    """Promoted after its end less the adaptive margin, the app would be
    stopped as soon as it started."""
    chain, settings = _chain(tmp_path, margin=30)
    assert _wait_unpromoted(tmp_path, chain, settings, T0 + 90) == pytest.approx(60, abs=1)


def test_the_submitter_submits_afresh_for_a_runner_that_gave_up(tmp_path: Path) -> None:
    """The usual case: the submitter finds the runner gone when it comes to
    promote it, judges nothing and submits a fresh runner."""
    chain, settings = _chain(tmp_path)
    _wait_unpromoted(tmp_path, chain, settings, T0 + 90)
    backend = FakeBackend(first_id=200)
    backend.set_state("102", JobState.COMPLETED)
    status = chain.load_status()
    assert status is not None
    status.runner_live = False  # runner 1 was judged
    Submitter(chain, settings, backend, tmp_path, "5", sleep=lambda s: None)._promote_next(status, 4)
    assert backend.submitted == [("c-1.r2", None)] and status.runner_job_id == "200" and status.runner_seq == 2
    assert not chain.runners_log.exists() or "102" not in chain.runners_log.read_text()
    assert "pre-queued job 102 gave up waiting" in chain.log_file.read_text()


@pytest.mark.parametrize("slurm_state", [JobState.COMPLETED, JobState.TIMEOUT])
def test_a_runner_that_gave_up_as_it_was_promoted_is_not_judged_a_timeout(
    tmp_path: Path, slurm_state: JobState
) -> None:
    """The race: the submitter promotes runner 2 just after it gave up. Its
    record says it ran no app: the chain goes on from the same counter, with
    the same margin and no runner without progress counted; also when its
    limit killed it after it wrote that record (TIMEOUT)."""
    chain, settings = _chain(tmp_path)
    _wait_unpromoted(tmp_path, chain, settings, T0 + 90)
    status = chain.load_status()
    assert status is not None
    # promoted (submitter._promote_next) after runner 1 was judged with one stall
    status.runner_seq, status.runner_job_id, status.next_job_id = 2, "102", ""
    status.iter_before, status.no_progress, status.margin = 4, 1, 10
    chain.save_status(status)
    backend = FakeBackend()
    backend.set_state("102", slurm_state)
    watch = RunnerWatch(chain, backend, tmp_path / "state_iter.txt", sleep=lambda s: None)
    outcome = watch.outcome_of(status)
    assert not outcome.app_ran and outcome.slurm_state is slurm_state
    decision = decide(
        outcome, Policy(settings.max_iter, settings.retries), Tally(status.no_progress, status.retries_used)
    )
    assert decision.verdict is Verdict.CONTINUE, decision
    assert "without running the app" in decision.reason
    assert decision.progress == Tally(no_progress=1)  # not counted as a stall
    record_judgment(Executor(chain, FakeBackend()), settings, status, outcome, decision)
    assert status.margin == 10 and status.iteration == 4 and not status.runner_live
    assert "runner margin" not in chain.log_file.read_text()
