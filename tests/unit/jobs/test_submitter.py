"""The submitter (``chain.jobs.submitter``) on a fake backend, with injected
clocks: no test sleeps.

SIGTERM: preemption hands over at once to a successor not queued behind the
preempted job (Slurm may requeue and hold it); a requeued copy of an older
cycle leaves at its start; someone's scancel, or chain cancel, is not turned
into a successor. The signal is real (sent to this process while the
submitter waits).

A full cluster: a submitter whose runner still waits for resources after
``step_aside_after`` seconds hands over to a successor that Slurm starts with
the runner (``afterany:<self>,after:<runner>``), so no submitter holds a slot
its own runner waits for."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import FakeBackend, SteppingClock, spy_on_executors

from chain import api
from chain.backends.base import JobInfo
from chain.backends.slurm.parse import parse_scontrol, preempting
from chain.core.model import ChainState, JobState
from chain.core.names import submitter_cycle
from chain.core.poll import StepAside
from chain.core.reasons import ReasonKind
from chain.errors import SchedulerError
from chain.jobs.sigterm import TermCatcher, Terminated
from chain.jobs.submitter import Submitter
from chain.primitives.codes import SubmitterExit
from chain.store import ChainDir, ChainStatus


class TermAt(SteppingClock):
    """A clock whose sleep past ``at`` is where SIGTERM arrives (once)."""

    def __init__(self, now: float, at: float) -> None:
        super().__init__(now)
        self.at, self.sent = at, False

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.now >= self.at and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)


def _submitter(
    tmp_path: Path,
    backend: FakeBackend,
    clock: SteppingClock,
    cycle: int = 0,
    job_name: str = "c-1.s0",
    **flags: object,
) -> tuple[ChainDir, Submitter]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    chain.save_status(
        ChainStatus(
            chain_id="c-1", workdir=str(tmp_path), state=ChainState.PENDING, submitter_job_id="5", submitter_cycle=cycle
        )
    )
    settings = api.load_settings(
        {"app_cmd": "true", "max_iter": 10, "step_aside_after": 0, **flags}, {}, None, tmp_path
    )
    return chain, Submitter(chain, settings, backend, tmp_path, "5", clock=clock, sleep=clock.sleep, job_name=job_name)


def test_a_preempted_submitter_hands_over_at_once_not_behind_itself(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), TermAt(1000.0, 1030.0)
    backend.preempted.add("5")
    chain, submitter = _submitter(tmp_path, backend, clock)
    assert submitter.run() == 0
    assert backend.submitted == [("c-1.r1", None), ("c-1.s1", None)]  # no afterany:5
    assert clock.now < 1040.0  # within the preemption's grace, not at its next poll
    status = chain.load_status()
    assert status is not None and status.submitter_job_id == "102" and status.submitter_cycle == 1
    assert status.runner_live and status.runner_job_id == "101" and not status.state.ended  # adopted
    assert "submitter 5 preempted: successor 102 (cycle 1) takes over" in chain.log_file.read_text()
    assert backend.cancelled == ["5"]  # its own job: no requeued copy waits in the queue to leave
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_a_requeued_copy_of_an_older_cycle_leaves_at_its_start(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), SteppingClock(1000.0)
    chain, submitter = _submitter(tmp_path, backend, clock, cycle=1, job_name="c-1.s0")
    before = (chain.root / "state.json").read_bytes()
    assert submitter.run() == 0
    assert backend.submitted == [] and (chain.root / "state.json").read_bytes() == before
    assert "submitter 5 (cycle 0): cycle 1 drives the chain; leaving" in chain.log_file.read_text()


def test_someones_scancel_is_not_turned_into_a_successor(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), TermAt(1000.0, 1030.0)
    chain, submitter = _submitter(tmp_path, backend, clock)
    assert submitter.run() == 128 + signal.SIGTERM
    assert backend.submitted == [("c-1.r1", None)] and backend.cancelled == []
    assert "not from preemption (scancel?): nothing drives the chain now" in chain.log_file.read_text()


def test_chain_cancels_sigterm_queues_nothing(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), TermAt(1000.0, 1030.0)
    backend.preempted.add("5")  # even so: chain cancel's mark wins
    chain, submitter = _submitter(tmp_path, backend, clock)
    chain.cancel_file.write_text("1\n")
    assert submitter.run() == 0
    assert backend.submitted == []


def test_the_catcher_raises_only_where_the_submitter_waits() -> None:
    slept: list[float] = []
    catcher = TermCatcher(slept.append)
    restore = catcher.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # outside a wait: only noted
        assert catcher.received
        with pytest.raises(Terminated):
            catcher.sleep(5.0)  # the next wait raises, without sleeping
        assert slept == []
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is not catcher._on_term


def test_scontrol_preempt_time_and_the_submitter_cycle_are_parsed() -> None:
    text = (
        "JobId=42 JobName=c-1.s3 JobState=RUNNING Reason=None ExitCode=0:0 "
        "StartTime=2026-12-03T12:00:00 EndTime=2026-12-03T12:00:30 PreemptEligibleTime=2026-12-03T12:00:00 "
        "PreemptTime=2026-12-03T12:00:30 SuspendTime=None\n"
    )
    assert parse_scontrol(text)["42"].preempt_time is not None
    assert (
        parse_scontrol(text.replace("PreemptTime=2026-12-03T12:00:30", "PreemptTime=None"))["42"].preempt_time is None
    )
    assert preempting(parse_scontrol(text)["42"])  # PreemptMode=CANCEL: PreemptTime is set
    # measured at the SIGTERM (22.05): PreemptMode=REQUEUE sets no PreemptTime but counts the restart;
    # a scancel shows the same state with Restarts unchanged
    requeue = "JobId=42 JobName=c-1.s3 JobState=COMPLETING Reason=None Requeue=1 Restarts=1 PreemptTime=None\n"
    scancel = "JobId=42 JobName=c-1.s3 JobState=COMPLETING Reason=None Requeue=1 Restarts=0 PreemptTime=None\n"
    assert preempting(parse_scontrol(requeue)["42"], restarts=0)
    assert not preempting(parse_scontrol(requeue)["42"], restarts=1)  # a requeued copy, scancelled
    assert not preempting(parse_scontrol(scancel)["42"], restarts=0)
    back = "JobId=42 JobName=c-1.s3 JobState=PENDING Reason=BeginTime Requeue=1 Restarts=1\n"
    assert preempting(parse_scontrol(back)["42"], restarts=1)
    assert submitter_cycle("c-1.s3") == 3 and submitter_cycle("c-1.r3") is None and submitter_cycle("x") is None


def test_a_requeued_copy_of_an_earlier_cycle_does_not_block_a_resume() -> None:
    """The fault suite's node-down: Slurm requeued the submitter (Restarts one up), which handed over;
    its copy waits PENDING (BeginTime) to leave at its start. Someone then scancels the successor:
    `chain submit --resume` must not be refused for the copy. A running submitter still is."""
    from chain.core.model import JobState
    from chain.errors import ChainDirError
    from chain.modes.common import refuse_live_submitter

    backend = FakeBackend()
    old = backend.submit(Path("s"), job_name="c-1.s0")  # 101: requeued, held
    successor = backend.submit(Path("s"), job_name="c-1.s1")  # 102: scancelled by someone
    backend.set_state(successor, JobState.CANCELLED)
    status = ChainStatus(chain_id="c-1", state=ChainState.RUNNING, submitter_cycle=1, submitter_job_id=successor)
    refuse_live_submitter(backend, status)  # not refused
    backend.set_state(old, JobState.RUNNING)  # about to leave, but running: refused, as any live submitter
    with pytest.raises(ChainDirError, match="still has an active submitter"):
        refuse_live_submitter(backend, status)


@pytest.mark.parametrize(
    ("patience", "since", "now", "due"),
    [
        (60.0, 100.0, 159.0, False),
        (60.0, 100.0, 160.0, True),
        (60.0, None, 1e9, False),
        (0.0, 100.0, 1e9, False),
    ],
)
def test_the_policy_is_due_after_its_patience_of_pending(
    patience: float, since: float | None, now: float, due: bool
) -> None:
    assert StepAside(patience).due(since, now) is due


def test_the_policy_asks_the_scheduler_no_later_than_it_is_due() -> None:
    assert StepAside(60.0).next_query(100.0, planned=430.0) == 160.0
    assert StepAside(60.0).next_query(100.0, planned=120.0) == 120.0
    assert StepAside(60.0).next_query(None, planned=430.0) == 430.0
    assert StepAside(0.0).next_query(100.0, planned=430.0) == 430.0


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
        if (
            self.clock.now >= self.at
            and self.states.get("101", None) is not None
            and self.states["101"].state is JobState.PENDING
        ):
            self.set_state("101", JobState.RUNNING)
        return super().query(job_ids, exit_codes=exit_codes)


def test_a_running_runner_keeps_its_submitter(tmp_path: Path) -> None:
    """Started within the patience: the submitter stays and waits, as the seed's does."""
    clock = SteppingClock(1000.0)
    backend = StartsAt(clock, 1030.0)  # resources came after 30 s
    _, submitter = _submitter(
        tmp_path, backend, clock, step_aside_after=60, submitter_time="10:00", submitter_margin="60"
    )
    submitter.run()  # hands over at its own margin instead, 9 minutes on
    _, successor = backend.submitted
    assert successor == ("c-1.s1", "afterany:5")
    assert clock.now >= 1000.0 + 540.0


def test_zero_never_steps_aside(tmp_path: Path) -> None:
    backend, clock = FakeBackend(), SteppingClock(1000.0)
    _, submitter = _submitter(
        tmp_path, backend, clock, step_aside_after=0, submitter_time="10:00", submitter_margin="60"
    )
    submitter.run()
    assert backend.submitted[-1] == ("c-1.s1", "afterany:5") and clock.now >= 1540.0


def test_a_submitters_events_all_go_through_its_one_executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its start, the counter, the lookahead runner dropped, the chain's
    completion announced and saved: the job's one executor, with its clock."""
    monkeypatch.setattr("chain.effects.hooks.run_hooks", lambda *a, **k: None)
    backend, clock = FakeBackend(), SteppingClock(1000.0)
    _, submitter = _submitter(tmp_path, backend, clock, notify=["true"])
    (tmp_path / "state_iter.txt").write_text("10\n")
    applied = spy_on_executors(monkeypatch)
    assert submitter.run() == 0
    names = [name for _, name in applied]
    assert names == ["SubmitterStarted", "CounterRead", "SuccessorDropped", "Announced", "Ended"], names
    assert all(run is submitter.executor for run, _ in applied) and submitter.executor.clock is clock


class UnreachableBackend(FakeBackend):
    """sbatch never gets an answer from slurmctld."""

    def submit(self, script: Path, **kwargs: object) -> str:
        raise SchedulerError("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")


@pytest.mark.parametrize(
    ("case", "kind"),
    [("counter", ReasonKind.BAD_CHECKPOINT), ("scheduler", ReasonKind.SCHEDULER_UNREACHABLE)],
)
def test_each_way_the_submitter_stops_the_chain_names_its_kind(tmp_path: Path, case: str, kind: ReasonKind) -> None:
    if case == "counter":
        (tmp_path / "state_iter.txt").write_text("twelve\n")
    backend = UnreachableBackend() if case == "scheduler" else FakeBackend()
    chain, submitter = _submitter(tmp_path, backend, SteppingClock(1000.0), submitter_time="0:30:00")
    assert submitter.run() == SubmitterExit.CHAIN_ENDED
    status = chain.load_status()
    assert status is not None and status.state is ChainState.STOPPED and status.reason_kind is kind, status
