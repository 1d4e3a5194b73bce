"""A relay runner that its predecessor's pace shows completing the chain
queues no successor at its start (``Relay._defer_until``): none to cancel
when it completes; one queued as soon as the guess proves wrong (its app
running at half its time, ending short, a signal from outside, a fault, a
requeue after its end). On the fake scheduler; end to end:
tests/e2e/test_relay_e2e.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FailingSubmits, FakeBackend

from chain import api
from chain.api.status import status_report
from chain.core.model import ChainState, JobState
from chain.core.names import runner_job_name
from chain.core.records import RunnerPhase, RunnerRecord
from chain.jobs.relay import AFTER_APP_RESERVE, Relay, Turn
from chain.store import ChainDir

NOW = 10_000.0


def _chain(tmp_path: Path, fake: FakeBackend) -> ChainDir:
    settings = {"app_cmd": "true", "max_iter": 10, "mode": "relay", "runner_margin": 5}
    api.submit(settings, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, backend=fake)
    return ChainDir(tmp_path / ".chain")


def _record(chain: ChainDir, job_id: str, seq: int, code: int, before: int, after: int, **extra: Any) -> RunnerRecord:
    fields: dict[str, Any] = {
        "start": NOW - 100,
        "app_start": NOW - 90,
        "end": NOW - 80,
        "iter_before": before,
        "iter_after": after,
        **extra,
    }
    record = RunnerRecord(job_id, f"x.r{seq}", seq=seq, status=RunnerPhase.ENDED, exit_code=code, **fields)
    chain.write_runner_record(record)
    return record


def _runner_two(
    tmp_path: Path, fake: FakeBackend, *, counter: int = 6, job_seconds: float = 60.0, **pred: Any
) -> tuple[ChainDir, Relay]:
    """Runner 1 handed over at ``counter`` after 10 s of app (pace ``counter``/10 s
    unless ``pred`` says otherwise); runner 2, with ``job_seconds`` left, at its start."""
    chain = _chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text(f"{counter}\n")
    _record(chain, "101", 1, 99, 0, counter, **pred)
    fake.set_state("101", JobState.COMPLETED, 0)
    relay = Relay(chain, api.stored_settings(chain), fake, tmp_path, "102", 2, clock=lambda: NOW, sleep=lambda s: None)
    relay.job_end = NOW + job_seconds
    return chain, relay


def test_a_runner_its_predecessors_pace_shows_completing_queues_no_successor(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)  # 4 left at 0.6/s: ~7 s of its 55 s
    take = relay.take_over()
    assert take.step is Turn.RUN and take.deferred_until == NOW + 27.5  # half of its 55 s of app
    assert len(fake.submitted) == 2  # runner 1 and 2 at submit; none at this take-over
    status = chain.load_status()
    assert status is not None and status.next_job_id == "" and status.runner_job_id == "102"
    assert not status.relay_broken
    assert "runner 3 not queued" in chain.log_file.read_text()
    # it completes: nothing to cancel
    done = relay.after_app(_record(chain, "102", 2, 0, 6, 10))
    assert done.step is Turn.COMPLETE
    relay.finish(done)
    assert fake.cancelled == []
    ended = chain.load_status()
    assert ended is not None and ended.state is ChainState.COMPLETED


def test_a_deferring_runner_that_stops_short_queues_its_successor_after_its_app(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    assert len(fake.submitted) == 2
    take = relay.after_app(_record(chain, "102", 2, 99, 6, 8))  # it ended early, short of MAX_ITER
    assert take.step is Turn.LEAVE
    status = chain.load_status()
    assert status is not None
    assert fake.submitted[-1] == (runner_job_name(status.chain_id, 3), "afterany:102")
    assert status.next_job_id == "103" and status.runner_live  # runner 3 judges it
    assert list(chain.iter_runners())[-1].job_id == "101"  # runner 2 not judged here


@pytest.mark.parametrize(
    ("counter", "job_seconds", "pred"),
    [
        (2, 60.0, {}),  # 8 left at 0.2/s: 40 s of its 55 s, more than half
        (6, 12.0, {}),  # 4 left at 0.6/s: 7 s of its 7 s
        (6, 60.0, {"app_start": None}),  # the predecessor's record does not tell its pace
        (6, 60.0, {"end": NOW - 95}),  # ended before its app started: no pace
        (6, float("inf"), {}),  # its own end unknown
    ],
)
def test_a_runner_not_sure_to_complete_queues_its_successor_at_its_start(
    tmp_path: Path, counter: int, job_seconds: float, pred: dict[str, Any]
) -> None:
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake, counter=counter, job_seconds=job_seconds, **pred)
    assert relay.take_over().step is Turn.RUN
    status = chain.load_status()
    assert status is not None and status.next_job_id == "103"
    assert fake.submitted[-1][1] == "afterany:102"


def test_runner_one_of_a_new_chain_keeps_the_successor_queued_at_submit(tmp_path: Path) -> None:
    """No predecessor, no pace: runner 2 stays queued (chain submit queued it)."""
    fake = FakeBackend()
    chain = _chain(tmp_path, fake)
    relay = Relay(chain, api.stored_settings(chain), fake, tmp_path, "101", 1, clock=lambda: NOW)
    relay.job_end = NOW + 3600
    assert relay.take_over().step is Turn.RUN
    status = chain.load_status()
    assert status is not None and status.next_job_id == "102" and len(fake.submitted) == 2


@pytest.mark.parametrize("preempted", [False, True])
def test_a_signal_from_outside_queues_the_deferred_successor_to_judge_it(tmp_path: Path, preempted: bool) -> None:
    """A time limit, scancel or preemption: the successor judges this runner
    from Slurm's final state, as when it was queued at the start; preempted,
    it is released from its dependency (the requeued copy would hold it)."""
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    assert len(fake.submitted) == 2
    take = relay.after_app(_record(chain, "102", 2, 124, 6, 8, external_signal="TERM", preempted=preempted))
    assert take.step is Turn.LEAVE
    status = chain.load_status()
    assert status is not None and status.next_job_id == "103" and status.runner_live
    assert fake.released == (["103"] if preempted else [])


@pytest.mark.parametrize("external", ["TERM", None])
def test_chain_cancel_leaves_the_deferred_successor_unqueued(tmp_path: Path, external: str | None) -> None:
    """Its scancel, or an app that ended on its own as the cancel came."""
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    chain.cancel_file.write_text("1\n")
    relay.after_app(_record(chain, "102", 2, 124 if external else 99, 6, 8, external_signal=external))
    relay.queue_deferred()
    assert len(fake.submitted) == 2


def test_a_learned_margin_leaves_the_runner_less_time_to_be_sure_in(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    status = chain.load_status()
    assert status is not None
    status.margin = 50  # 10 s of app: 4 left at 0.6/s take 6.7 s, more than half
    chain.save_status(status)
    assert relay.take_over().deferred_until is None and len(fake.submitted) == 3


def test_the_configured_limit_bounds_the_time_when_slurms_end_is_later(tmp_path: Path) -> None:
    """Slurm counts limits in minutes: a 0:30 runner's job ends 60 s after its
    start, its app stops by its 30 s (``plan_schedule``): so does the guess."""
    fake = FakeBackend()
    _, relay = _runner_two(tmp_path, fake)
    relay.limit_end = NOW + 12  # 7 s of app: 4 left at 0.6/s take 6.7 s, more than half
    assert relay.take_over().deferred_until is None and len(fake.submitted) == 3


def test_the_deferred_successor_is_queued_once_when_the_app_outlives_its_pace(tmp_path: Path) -> None:
    """``queue_deferred``, as the supervision calls it at ``deferred_until``;
    a second call queues nothing."""
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    relay.queue_deferred(NOW + 55)
    relay.queue_deferred(NOW + 55)
    status = chain.load_status()
    assert status is not None and status.next_job_id == "103"
    assert fake.submitted[2:] == [(runner_job_name(status.chain_id, 3), "afterany:102")]
    assert "queueing runner 3: runner job 102 has none" in chain.log_file.read_text()
    # the app then stops short: nothing more is queued after it
    assert relay.after_app(_record(chain, "102", 2, 124, 6, 9)).step is Turn.LEAVE
    assert len(fake.submitted) == 3


def test_a_runner_no_longer_current_queues_nothing(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    other = Relay(chain, relay.settings, fake, tmp_path, "555", 7, clock=lambda: NOW)
    other.queue_deferred()
    assert len(fake.submitted) == 2


def test_a_successor_that_cannot_be_queued_after_the_app_shows_the_chain_stalled(tmp_path: Path) -> None:
    """Tried until shortly before the job's end (not only up to its margin,
    which the app has used: here one attempt); then the relay is broken, and
    ``chain status`` says the chain is stalled."""
    fake = FailingSubmits()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    fake.refuse, fake.submit_calls = True, 0
    now = [relay.job_end - 4.5]  # the app stopped at its margin and saved
    relay.clock = lambda: now[0]
    relay.sleep = lambda s: now.__setitem__(0, now[0] + s)
    assert relay.after_app(_record(chain, "102", 2, 99, 6, 8)).step is Turn.LEAVE
    status = chain.load_status()
    assert status is not None and "could not queue runner 3" in status.relay_broken
    assert fake.submit_calls >= 1 and now[0] <= relay.job_end - AFTER_APP_RESERVE
    fake.set_state("102", JobState.COMPLETED, 0)
    assert status_report(tmp_path / ".chain", backend=fake).stalled


def test_a_deferring_runner_killed_outright_leaves_a_chain_status_calls_stranded(tmp_path: Path) -> None:
    """The one case the deferral gives up: killed with no signal first (SIGKILL,
    a node lost where Slurm does not requeue), it queued nothing; ``chain
    status`` tells, and a resume goes on from the checkpoint."""
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    fake.set_state("102", JobState.NODE_FAIL)
    report = status_report(tmp_path / ".chain", backend=fake)
    assert report.stalled and report.state is ChainState.RUNNING
    api.submit({}, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, resume=True, backend=fake)
    resumed = chain.load_status()
    assert resumed is not None and resumed.runner_live and resumed.next_job_id == str(fake.next_id - 1)


def _runner_two_job(tmp_path: Path, fake: FakeBackend) -> tuple[ChainDir, str]:
    """A chain whose runner 1 handed over at 6 of 10 at 0.6/s, as runner 2's job
    finds it (real time: ``jobs.runner.run`` keeps its own clock); its runner 2's name."""
    now = time.time()
    chain = _chain(tmp_path, fake)
    (tmp_path / "state_iter.txt").write_text("6\n")
    _record(chain, "101", 1, 99, 0, 6, start=now - 20, app_start=now - 15, end=now - 5)
    fake.set_state("101", JobState.COMPLETED, 0)
    fake.job_end = now + 120
    status = chain.load_status()
    assert status is not None
    return chain, runner_job_name(status.chain_id, 2)


def test_a_deferring_runner_that_fails_leaves_its_successor_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault between the take-over and the app's judgment (storage, the app's
    lock): the successor is queued on the way out, to judge this runner."""
    from chain.jobs import runner

    def broken(*args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    fake = FakeBackend()
    chain, name = _runner_two_job(tmp_path, fake)
    monkeypatch.setattr(runner, "_run_current", broken)
    with pytest.raises(OSError, match="No space"):
        runner.run(chain, api.stored_settings(chain), fake, job_id="102", job_name=name, workdir=tmp_path)
    assert "runner 3 not queued" in chain.log_file.read_text()  # it had deferred
    status = chain.load_status()
    assert status is not None and status.next_job_id == "103" and fake.submitted[-1][1] == "afterany:102"


def test_a_deferring_runner_requeued_after_its_end_queues_its_successor(tmp_path: Path) -> None:
    """Preempted (PreemptMode=REQUEUE) after it recorded its end and before it
    queued its successor: its requeued copy runs no app and queues it."""
    from chain.jobs import runner

    fake = FakeBackend()
    chain, name = _runner_two_job(tmp_path, fake)
    assert fake.job_end is not None
    relay = Relay(chain, api.stored_settings(chain), fake, tmp_path, "102", 2, job_end=fake.job_end)
    assert relay.take_over().deferred_until is not None and len(fake.submitted) == 2
    _record(chain, "102", 2, 124, 6, 8, external_signal="TERM", preempted=True)
    code = runner.run(chain, api.stored_settings(chain), fake, job_id="102", job_name=name, workdir=tmp_path)
    assert code == 0
    status = chain.load_status()
    assert status is not None and status.next_job_id == "103" and fake.submitted[-1][1] == "afterany:102"


def test_chain_status_says_why_nothing_is_queued_behind_a_deferring_runner(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from chain.cli.status_view import print_status

    def shown() -> str:
        out = io.StringIO()
        print_status(status_report(tmp_path / ".chain", backend=fake), console=Console(file=out, width=300))
        return out.getvalue()

    fake = FakeBackend()
    _, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    fake.set_state("102", JobState.RUNNING)
    assert "next runner: none yet (the running one is expected to complete the chain" in shown()
    fake.set_state("102", JobState.NODE_FAIL)  # killed outright: nothing runs, nothing is queued
    assert "next runner: none;" not in shown() and "next runner: none\n" in shown()


def test_beside_the_app_the_deferred_successor_is_tried_until_the_stop_time_only(tmp_path: Path) -> None:
    """The supervision waits for it: its retries end at the stop time it is given."""
    fake = FailingSubmits()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()
    fake.refuse = True
    now = [NOW + 27.5]
    relay.clock = lambda: now[0]
    relay.sleep = lambda s: now.__setitem__(0, now[0] + s)
    relay.queue_deferred(until=NOW + 55)
    assert now[0] <= NOW + 55 and fake.submit_calls >= 1
    status = chain.load_status()
    assert status is not None and "could not queue runner 3" in status.relay_broken


def test_queueing_the_deferred_successor_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBackend()
    chain, relay = _runner_two(tmp_path, fake)
    relay.take_over()

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ChainDir, "load_status", full)
    relay.queue_deferred()
    assert "could not queue a runner behind job 102: [Errno 28] No space left" in chain.log_file.read_text()
