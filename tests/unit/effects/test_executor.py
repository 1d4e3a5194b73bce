"""The executor (``chain.effects.executor``): it applies the protocol's
events to the caller's record, carries their effects out in order, logs a
refused event or a failed cancel, and retries the scheduler until a deadline
on an injected clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _chains import running_status as _running
from fakes import FakeBackend

from chain.core import events as ev
from chain.core.model import ChainState
from chain.effects.executor import Executor
from chain.errors import ProtocolError, SchedulerError
from chain.store import ChainDir, ChainStatus


def test_a_refused_event_is_logged_and_nothing_of_it_or_after_it_is_applied(tmp_path: Path) -> None:
    """A submitter that starts on a chain cancelled meanwhile must not make it
    running again: refused, said in chain.log, state.json as it was."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    status = _running(state=ChainState.CANCELLED, reason="cancelled by chain cancel")
    chain.save_status(status)
    fake = FakeBackend()
    with pytest.raises(ProtocolError, match="SubmitterStarted refused: the chain is cancelled"):
        Executor(chain, fake).apply(status, ev.SubmitterStarted("77"), ev.SuccessorDropped())
    assert status.state is ChainState.CANCELLED and status.submitter_job_id == "50"
    assert status.next_job_id == "104" and fake.cancelled == []  # the event after it never ran
    saved = chain.load_status()
    assert saved is not None and saved.state is ChainState.CANCELLED and saved.submitter_job_id == "50"
    assert "protocol: chain demo-abc123: SubmitterStarted refused: the chain is cancelled" in (
        chain.log_file.read_text()
    )


def test_the_executor_updates_the_callers_record_and_carries_effects_out_in_order(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    saved_at_cancel: list[str] = []

    class Watching(FakeBackend):
        def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
            on_disk = chain.load_status()
            saved_at_cancel.append(on_disk.next_job_id if on_disk else "?")
            super().cancel(job_id, signal=signal, steps_only=steps_only)

    fake = Watching()
    status = _running(next_job_id=fake.submit(tmp_path / "r.sh", job_name="demo-abc123.r4"))
    held = status
    Executor(chain, fake).apply(status, ev.SuccessorDropped(), ev.RunnerIntended(20, 5.0))
    assert held is status and status.runner_seq == 4 and status.next_job_id == ""
    assert fake.cancelled == ["101"] and saved_at_cancel == [""]  # forgotten on disk before the cancel
    saved = chain.load_status()
    assert saved is not None and saved.runner_seq == 4 and saved.runner_live
    assert "cancelled the queued runner job 101" in chain.log_file.read_text()


def test_a_failed_cancel_is_logged_not_raised(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()

    class Refusing(FakeBackend):
        def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
            raise SchedulerError("scancel: slurmctld down")

    status = _running()
    Executor(chain, Refusing()).apply(status, ev.SuccessorDropped())
    assert status.next_job_id == ""
    assert "cancel of the queued runner job 104 failed: scancel: slurmctld down" in chain.log_file.read_text()


def test_retry_rides_out_an_outage_until_its_deadline_on_the_injected_clock(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    calls = []

    def down() -> str:
        calls.append(now[0])
        raise SchedulerError("sbatch: Socket timed out")

    run = Executor(chain, FakeBackend(), clock=lambda: now[0], sleep=sleep)
    with pytest.raises(SchedulerError):
        run.retry("submitting runner 4", down, give_up=300.0)
    assert len(calls) > 3 and now[0] <= 300.0  # no attempt started that would end past the deadline
    assert "submitting runner 4: " in chain.log_file.read_text()
    failures = [SchedulerError("down")]

    def flaky() -> str:
        if failures:
            raise failures.pop()
        return "107"

    assert run.retry("submitting runner 4", flaky, give_up=now[0] + 300.0) == "107"


def test_chain_cancel_between_a_starting_submitters_read_and_its_save_is_refused_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one way found for an illegal event to reach the protocol from real
    code: ``chain cancel`` (api.cancel, whole) records the cancel after the
    submitter job read state.json (pending) and before its first save. The
    compare-and-save finds the newer, cancelled state; SubmitterStarted is
    refused there, said in chain.log with the state and the event, never
    applied; the job's entry point leaves with 0 and queues nothing. The
    moment is forced here (a hook at the submitter's first save): with real
    jobs the window is milliseconds wide, since chain cancel waits for the
    jobs to leave before it records the cancel and the jobs read state.json
    again before each decision, so no fault-suite case can aim at it."""
    from chain import api
    from chain.api import cancelling
    from chain.jobs import entry

    fake = FakeBackend()
    fired: list[bool] = []

    class CancelledMeanwhile(ChainDir):
        def saving(self, **kwargs: Any) -> Any:
            if not fired:  # chain cancel, run whole in the window
                fired.append(True)
                assert cancelling.cancel(self.root, wait=0.0, backend=fake, sleep=lambda _: None) == (
                    "chain c-1 cancelled"
                )
            return super().saving(**kwargs)

    chain = CancelledMeanwhile(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10, "backend": "local"}, {}, None, tmp_path)
    chain.write_settings(settings.to_json())
    before = ChainStatus(chain_id="c-1", workdir=str(tmp_path), backend="local", submitter_job_id="77")
    chain.save_status(before)
    monkeypatch.setattr(entry, "job_context", lambda _: (chain, settings, fake, tmp_path))
    environ = {"SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "c-1.s0"}

    assert entry.submitter_main(str(chain.root), environ) == 0
    saved = chain.load_status()
    assert saved is not None and fired
    assert (saved.state, saved.reason, saved.submitter_job_id) == (
        ChainState.CANCELLED,
        "cancelled by chain cancel",
        "77",
    )
    assert saved.revision == 1  # the cancel's one save; the submitter's never happened
    log = chain.log_file.read_text()
    assert (
        "protocol: chain c-1: SubmitterStarted refused: the chain is cancelled"
        " (another process changed state.json first)" in log
    )
    assert "submitter 77: the chain was cancelled by another process meanwhile; leaving" in log
    assert "start on" not in log  # the submitter's start line: it never started
    assert fake.submitted == [] and fake.cancelled == ["77"]  # chain cancel's scancel of it; nothing queued
