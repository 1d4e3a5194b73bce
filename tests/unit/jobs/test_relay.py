"""Relay mode's protocol (``chain.jobs.relay``) on a real chain directory and
the fake scheduler: who runs, who judges, what gets queued, how a relay
ends, stalls and is settled. End to end on both backends: tests/e2e/test_relay_e2e.py."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FailingSubmits, FakeBackend, spy_on_executors

from chain import api
from chain.api.status import status_report
from chain.core.model import ChainState, JobState
from chain.core.names import runner_job_name
from chain.core.records import RunnerPhase, RunnerRecord
from chain.errors import ProtocolError, SchedulerError
from chain.jobs.relay import Relay, Turn
from chain.store import ChainDir, ChainStatus


def _relay_chain(tmp_path: Path, fake: FakeBackend, **flags: Any) -> tuple[ChainDir, ChainStatus]:
    settings = {"app_cmd": "true", "max_iter": 10, "mode": "relay", **flags}
    api.submit(settings, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, backend=fake)
    chain = ChainDir(tmp_path / ".chain")
    status = chain.load_status()
    assert status is not None
    return chain, status


def _relay(tmp_path: Path, chain: ChainDir, fake: FakeBackend, job_id: str, seq: int) -> Relay:
    return Relay(chain, api.stored_settings(chain), fake, tmp_path, job_id, seq, sleep=lambda s: None)


def _ended(chain: ChainDir, job_id: str, seq: int, code: int, before: int, after: int, **extra: Any) -> RunnerRecord:
    record = RunnerRecord(
        job_id,
        f"x.r{seq}",
        seq=seq,
        status=RunnerPhase.ENDED,
        exit_code=code,
        iter_before=before,
        iter_after=after,
        start=1.0,
        end=2.0,
        **extra,
    )
    chain.write_runner_record(record)
    return record


def test_submit_queues_runner_one_and_its_successor_and_no_submitter(tmp_path: Path) -> None:
    fake = FakeBackend()
    _, status = _relay_chain(tmp_path, fake)
    assert [name for name, _ in fake.submitted] == [
        runner_job_name(status.chain_id, 1),
        runner_job_name(status.chain_id, 2),
    ]
    assert fake.submitted[1][1] == f"afterany:{status.runner_job_id}"
    assert status.submitter_job_id == "" and status.next_job_id == "102" and status.runner_live


def test_runner_one_takes_over_without_queueing_a_second_successor(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _status = _relay_chain(tmp_path, fake)
    take = _relay(tmp_path, chain, fake, "101", 1).take_over()
    assert take.step is Turn.RUN
    assert len(fake.submitted) == 2
    assert chain.load_status().state is ChainState.RUNNING  # type: ignore[union-attr]


def test_successor_judges_a_handoff_becomes_current_and_queues_the_next(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, status = _relay_chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("4\n")
    _ended(chain, "101", 1, 99, 0, 4)
    fake.set_state("101", JobState.COMPLETED, 0)
    take = _relay(tmp_path, chain, fake, "102", 2).take_over()
    assert take.step is Turn.RUN
    now = chain.load_status()
    assert now is not None
    assert (now.runner_seq, now.runner_job_id, now.runner_live, now.iter_before) == (2, "102", True, 4)
    assert fake.submitted[-1] == (runner_job_name(status.chain_id, 3), "afterany:102")
    assert now.next_job_id == "103"
    judged = list(chain.iter_runners())
    assert [(r.job_id, r.verdict) for r in judged] == [("101", "continue")]
    # its record has the exit code: Slurm is asked only for the state (no sacct)
    assert fake.asked_exit_codes == [False]


def test_a_scancelled_predecessor_ends_the_chain_cancelled_without_the_app(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    fake.set_state("101", JobState.CANCELLED)  # no record: killed from outside
    take = _relay(tmp_path, chain, fake, "102", 2).take_over()
    assert take.step is Turn.END and take.state is ChainState.CANCELLED
    assert "cancelled by user" in take.why
    assert fake.asked_exit_codes == [True]  # no record: Slurm's exit code is the evidence


def test_a_requeued_predecessor_keeps_its_turn(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    fake.set_state("101", JobState.PENDING)  # requeued before it could record an end
    take = _relay(tmp_path, chain, fake, "102", 2).take_over()
    assert take.step is Turn.LEAVE and "requeued" in take.why
    status = chain.load_status()
    assert status is not None and status.next_job_id == "" and status.runner_job_id == "101"
    # when it runs again it is still the current runner, and queues a successor
    again = _relay(tmp_path, chain, fake, "101", 1).take_over()
    assert again.step is Turn.RUN and fake.submitted[-1][1] == "afterany:101"


def test_a_job_that_is_not_the_relay_leaves(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    assert _relay(tmp_path, chain, fake, "555", 2).take_over().step is Turn.LEAVE
    assert _relay(tmp_path, chain, fake, "102", 7).take_over().step is Turn.LEAVE


def test_a_successor_that_cannot_be_queued_still_runs_the_app_and_the_chain_shows_stalled(tmp_path: Path) -> None:
    fake = FailingSubmits()
    chain, _ = _relay_chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("4\n")
    _ended(chain, "101", 1, 99, 0, 4)
    fake.set_state("101", JobState.COMPLETED, 0)
    fake.refuse = True
    relay = _relay(tmp_path, chain, fake, "102", 2)
    relay.clock = iter(range(0, 100000, 50)).__next__  # the retry's patience runs out at once
    assert relay.take_over().step is Turn.RUN
    status = chain.load_status()
    assert status is not None and "QOSMaxSubmitJobPerUserLimit" in status.relay_broken
    fake.set_state("102", JobState.COMPLETED, 0)  # the app ran; nothing is queued behind it
    report = status_report(tmp_path / ".chain", backend=fake)
    assert report.stalled and report.state is ChainState.RUNNING
    # and it is resumable: the job queued judges runner 2 first
    fake.refuse = False
    api.submit({}, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, resume=True, backend=fake)
    resumed = chain.load_status()
    assert resumed is not None
    assert fake.submitted[-1] == (runner_job_name(resumed.chain_id, 3), None)
    assert resumed.next_job_id == str(fake.next_id - 1) and resumed.runner_live


def test_a_short_runner_stops_retrying_its_successor_before_its_own_end(tmp_path: Path) -> None:
    """The successor's sbatch is retried for SUBMIT_PATIENCE (300 s), but never
    past the job's own end less its margin: a 2-minute runner gives up in time
    to run its app and record its end (relay broken, chain stalled)."""
    fake = FailingSubmits()
    chain, _ = _relay_chain(tmp_path, fake, runner_margin=10)
    (tmp_path / "state_iter.txt").write_text("4\n")
    _ended(chain, "101", 1, 99, 0, 4)
    fake.set_state("101", JobState.COMPLETED, 0)
    fake.refuse = True
    now = [1000.0]
    relay = _relay(tmp_path, chain, fake, "102", 2)
    relay.clock = lambda: now[0]
    relay.sleep = lambda s: now.__setitem__(0, now[0] + s)
    relay.job_end = 1000.0 + 120
    assert relay.take_over().step is Turn.RUN
    status = chain.load_status()
    assert status is not None and status.relay_broken
    assert now[0] <= relay.job_end - 10, f"still retrying at {now[0] - 1000:.0f} s of a 120 s job"
    assert fake.submit_calls >= 2  # it did retry


def test_resume_refuses_while_a_relay_job_is_queued(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, status = _relay_chain(tmp_path, fake)
    status.state = ChainState.STOPPED
    chain.save_status(status)
    from chain.errors import ChainDirError

    with pytest.raises(ChainDirError, match="still has a runner job"):
        api.submit({}, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, resume=True, backend=fake)


def test_a_runner_reaching_max_iter_completes_the_chain_and_cancels_its_successor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[str, ...] | None] = []
    monkeypatch.setattr("chain.effects.hooks.run_hooks", lambda *a, **k: ran.append(k.get("only")))
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    assert relay.take_over().step is Turn.RUN
    record = _ended(chain, "101", 1, 0, 0, 10)
    take = relay.after_app(record)
    assert take.step is Turn.COMPLETE
    relay.finish(take)
    status = chain.load_status()
    assert status is not None and status.state is ChainState.COMPLETED
    assert fake.cancelled == ["102"] and ran == [None]


@pytest.mark.parametrize("code", [0, 3])
def test_a_relay_runners_events_all_go_through_its_one_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Its take-over, its judgment and the chain's end (the successor
    dropped, the announcement, the end saved): the job's one executor."""
    monkeypatch.setattr("chain.effects.hooks.run_hooks", lambda *a, **k: None)
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake, notify=["true"])
    relay = _relay(tmp_path, chain, fake, "101", 1)
    applied = spy_on_executors(monkeypatch)
    relay.take_over()
    relay.finish(relay.after_app(_ended(chain, "101", 1, code, 0, 10 if code == 0 else 0)))
    names = [name for _, name in applied]
    assert names[0] == "RelayTookOver" and names[-2:] == ["Announced", "Ended"], names
    assert ("SuccessorDropped" if code == 0 else "Ending") in names
    assert all(run is relay.executor for run, _ in applied)


def test_a_failing_app_ends_the_chain_in_its_own_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("chain.effects.hooks.run_hooks", lambda *a, **k: None)
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    take = relay.after_app(_ended(chain, "101", 1, 3, 0, 0, detail="app exited 3"))
    assert take.step is Turn.END and take.state is ChainState.FAILED
    relay.finish(take)
    assert fake.cancelled == ["102"]


@pytest.mark.parametrize("code, external", [(99, None), (124, "TERM")])
def test_a_handoff_or_an_outside_signal_is_left_to_the_successor(
    tmp_path: Path, code: int, external: str | None
) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    take = relay.after_app(_ended(chain, "101", 1, code, 0, 4, external_signal=external))
    assert take.step is Turn.LEAVE
    status = chain.load_status()
    assert status is not None and status.runner_live and list(chain.iter_runners()) == []


def test_a_preempted_runner_releases_its_successor_from_its_dependency(tmp_path: Path) -> None:
    """Under PreemptMode=REQUEUE the preempted runner's job goes back to the queue, held ~2 min:
    its successor (afterany on it) would wait that out; the runner drops the dependency."""
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    take = relay.after_app(_ended(chain, "101", 1, 124, 0, 4, external_signal="TERM", preempted=True))
    assert take.step is Turn.LEAVE and fake.released == ["102"]
    assert "queued runner job 102 released" in chain.log_file.read_text()
    status = chain.load_status()
    assert status is not None and status.runner_live and status.next_job_id == "102"  # left to it to judge


def test_an_outside_signal_that_was_no_preemption_releases_nothing(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    relay.after_app(_ended(chain, "101", 1, 124, 0, 4, external_signal="TERM"))
    assert fake.released == []


def test_the_released_successor_cancels_the_requeued_predecessor_at_once(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("4\n")
    _ended(chain, "101", 1, 124, 0, 4, external_signal="TERM", preempted=True)
    fake.set_state("101", JobState.PENDING)  # requeued by Slurm after its end record, held
    take = _relay(tmp_path, chain, fake, "102", 2).take_over()
    assert take.step is Turn.RUN and fake.cancelled == ["101"]
    assert fake.queries <= 3  # one look, the cancel, then settled: no handoff schedule waited out
    [judged] = chain.iter_runners()
    assert judged.verdict == "continue" and "preempted" in judged.reason


def test_the_runner_ends_the_chain_when_its_queued_successor_was_scancelled(tmp_path: Path) -> None:
    """No job of the chain would judge runner 1 once its successor is gone:
    it judges itself (its work kept) and ends the chain cancelled."""
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    fake.cancel("102")  # the user's scancel of the queued successor
    take = relay.after_app(_ended(chain, "101", 1, 99, 0, 4))
    assert take.step is Turn.END and take.state is ChainState.CANCELLED and "102" in take.why
    relay.finish(take)
    status = chain.load_status()
    assert status is not None and status.state is ChainState.CANCELLED
    assert status.reason == "runner job 102 was cancelled outside chain (scancel)" and status.iteration == 4
    [judged] = chain.iter_runners()
    assert (judged.job_id, judged.verdict, judged.iter_after) == ("101", "continue", 4)


def test_a_successor_cancelled_by_chain_cancel_is_not_cancelled_outside(tmp_path: Path) -> None:
    """chain cancel's own cancel of the successor: the runner leaves the ending to it."""
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    chain.cancel_file.write_text("1\n")
    fake.cancel("102")
    assert relay.after_app(_ended(chain, "101", 1, 99, 0, 4)).step is Turn.LEAVE
    status = chain.load_status()
    assert status is not None and not status.state.ended


def test_a_live_successor_is_left_to_judge(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    assert relay.after_app(_ended(chain, "101", 1, 99, 0, 4)).step is Turn.LEAVE  # 102 PENDING
    status = chain.load_status()
    assert status is not None and status.runner_live and not status.state.ended


def test_chain_logs_submitter_says_a_relay_has_none(tmp_path: Path) -> None:
    from chain.api.logs import submitter_log
    from chain.errors import ChainDirError

    chain, _ = _relay_chain(tmp_path, FakeBackend())
    with pytest.raises(ChainDirError, match="relay mode: it has no submitter job"):
        submitter_log(api.open_chain(chain.root))


def _run_runner_one(tmp_path: Path, fake: FakeBackend) -> tuple[int, RunnerRecord]:
    """Runner 1 of a relay chain, run as its job runs it (chain.jobs.runner),
    with an app that saves 4 and hands over (99); its code and record."""
    from chain.jobs import runner

    chain, _ = _relay_chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("0\n")
    settings = dataclasses.replace(api.stored_settings(chain), app_cmd="echo 4 > state_iter.txt; exit 99")
    code = runner.run(chain, settings, fake, job_id="101", job_name=runner_job_name("x", 1), workdir=tmp_path)
    record = chain.runner_record("101")
    assert record is not None
    return code, record


def test_a_relay_runner_asks_its_own_end_once(tmp_path: Path) -> None:
    """The relay's deadline and the app's stop schedule share one answer (one
    squeue less on the handoff's path)."""
    fake = FakeBackend()
    fake.job_end = time.time() + 600.0  # later than the configured limit: that rules
    code, record = _run_runner_one(tmp_path, fake)
    assert (record.exit_code, record.iter_after, code) == (99, 4, 99)
    assert fake.end_time_calls == 1


def test_a_relay_runner_asks_its_end_again_when_the_first_answer_failed(tmp_path: Path) -> None:
    """slurmctld did not answer at the start: the app's schedule is planned
    from the scheduler's end once it answers, not from the configured limit."""

    class LateEnd(FakeBackend):
        def scheduler_end(self, job_id: str) -> float | None:
            self.end_time_calls += 1
            if self.end_time_calls == 1:
                raise SchedulerError("slurm_load_jobs error: Unable to contact slurm controller")
            return self.job_end

    fake = LateEnd()
    fake.job_end = time.time() + 30.0  # earlier than the configured 3-minute limit
    _, record = _run_runner_one(tmp_path, fake)
    assert fake.end_time_calls == 2
    assert record.slurm_end == fake.job_end and record.end_planned == fake.job_end


@pytest.mark.parametrize(("code", "after"), [(3, 0), (0, 10)])
def test_a_cancel_between_a_runners_judgment_and_its_ending_is_the_users_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, after: int
) -> None:
    """The relay judges under the chain's lock and ends the chain outside it
    (the hooks may take long; a cancel must not wait for them). A chain cancel
    landing in between wins: the runner's ending is refused by the protocol
    (the failure's hooks never run, nothing is saved over the cancel); a
    completion's hooks still run (the work is complete), its end is refused."""
    ran: list[tuple[str, ...] | None] = []
    monkeypatch.setattr("chain.effects.hooks.run_hooks", lambda *a, **k: ran.append(k.get("only")))
    fake = FakeBackend()
    chain, _ = _relay_chain(tmp_path, fake)
    relay = _relay(tmp_path, chain, fake, "101", 1)
    relay.take_over()
    take = relay.after_app(_ended(chain, "101", 1, code, 0, after))
    assert take.step is (Turn.COMPLETE if code == 0 else Turn.END)
    fake.set_state("101", JobState.COMPLETED, code)  # the runner's app is done: the cancel waits for no one
    api.cancel(chain.root, backend=fake, wait=0.0, sleep=lambda s: None)
    with pytest.raises(ProtocolError, match="refused"):
        relay.finish(take)
    status = chain.load_status()
    assert status is not None and status.state is ChainState.CANCELLED
    assert status.reason == "cancelled by chain cancel", status.reason
    assert ran == ([None] if code == 0 else [])
    assert "refused" in chain.log_file.read_text()
