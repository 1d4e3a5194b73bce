"""The runner (``chain.jobs.runner``) around a real app process, on the fake
scheduler: how an app that exits after the runner's own stop signal is
judged, what its environment holds, how its log names it and what it says when the counter file was never
written. The stop signal comes from an injected clock that jumps past
the stop time once the app says it is ready: no real wait for the schedule."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from chain import api
from chain.core.decision import Policy, Tally, Verdict, decide
from chain.core.records import RunnerRecord
from chain.jobs import runner
from chain.jobs.watch import RunnerWatch
from chain.store import ChainDir, ChainStatus

# the app's trap is set before it says it is ready, so the stop signal never
# comes before the app can handle it
SAVES_ON_TERM = "trap 'echo {saved} > state_iter.txt; exit {code}' TERM; touch ready; while :; do sleep 0.05; done"


def _chain(tmp_path: Path, app_cmd: str, counter: int | None = 0, **flags: Any) -> tuple[ChainDir, Any]:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": app_cmd, "max_iter": 150, **flags}, {}, None, tmp_path)
    if counter is not None:
        (tmp_path / "state_iter.txt").write_text(f"{counter}\n")
    chain.save_status(
        ChainStatus(
            chain_id="c-1",
            workdir=str(tmp_path),
            runner_seq=1,
            runner_job_id="7",
            runner_live=True,
            iter_before=counter or 0,
        )
    )
    return chain, settings


def _stop_when_ready(tmp_path: Path) -> Callable[[], float]:
    """A clock at real time until the app has touched ``ready``, then past
    the stop time (the default schedule: 180 s, margin 60) and well before
    the kill time."""
    ready = tmp_path / "ready"
    return lambda: time.time() + (130.0 if ready.exists() else 0.0)


def _run(
    tmp_path: Path,
    chain: ChainDir,
    settings: Any,
    clock: Callable[[], float] | None = None,
) -> tuple[int, RunnerRecord]:
    code = runner.run(
        chain,
        settings,
        FakeBackend(),
        job_id="7",
        job_name="c-1.r1",
        workdir=tmp_path,
        clock=clock or _stop_when_ready(tmp_path),
    )
    record = chain.runner_record("7")
    assert record is not None
    return code, record


def _judge(tmp_path: Path, chain: ChainDir, settings: Any, record: RunnerRecord) -> Any:
    status = chain.load_status()
    assert status is not None
    outcome = RunnerWatch(chain, FakeBackend(), tmp_path / settings.ckpt_path).outcome(status, record, None)
    return decide(outcome, Policy(settings.max_iter), Tally())


def test_an_app_that_saves_on_term_and_exits_0_continues_the_chain(tmp_path: Path) -> None:
    """A user's app: it saves on TERM and ``sys.exit(0)``s at 75
    of 150. The seed's ``timeout`` said 124 whatever the app's code; chain
    failed it ("app exited 0 but the counter is 75 < MAX_ITER 150")."""
    chain, settings = _chain(tmp_path, SAVES_ON_TERM.format(saved=75, code=0))
    code, record = _run(tmp_path, chain, settings)
    assert (code, record.app_exit_code, record.iter_after) == (124, 0, 75)
    assert record.detail == "app stopped on the signal (exit 0) after SIGTERM"
    decision = _judge(tmp_path, chain, settings, record)
    assert decision.verdict is Verdict.CONTINUE and "0->75" in decision.reason


def test_an_app_that_exits_0_on_the_signal_at_max_iter_is_done(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, SAVES_ON_TERM.format(saved=150, code=0), counter=140)
    code, record = _run(tmp_path, chain, settings)
    assert (code, record.iter_after) == (0, 150)
    assert _judge(tmp_path, chain, settings, record).verdict is Verdict.COMPLETE


@pytest.mark.parametrize("exit_code", [0, 1])
def test_an_app_that_exits_on_the_signal_without_saving_has_not_advanced(tmp_path: Path, exit_code: int) -> None:
    """Any code, 0 included, is judged by the counter: not advanced is the
    runner's 1 (stopped without advance: a failure), as a crash while saving is."""
    chain, settings = _chain(tmp_path, SAVES_ON_TERM.format(saved=10, code=exit_code), counter=10)
    code, record = _run(tmp_path, chain, settings)
    assert (code, record.app_exit_code, record.iter_after) == (1, exit_code, 10)
    assert _judge(tmp_path, chain, settings, record).verdict is Verdict.STOP


def test_a_successful_app_is_described_as_a_success(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, "echo 150 > state_iter.txt", counter=140)
    code, record = _run(tmp_path, chain, settings, clock=time.time)
    assert code == 0 and record.detail.startswith("app finished (exit 0) after "), record.detail
    assert "before the stop signal" not in record.detail


@pytest.mark.parametrize(
    "app_cmd", ["exit 0", SAVES_ON_TERM.format(saved=0, code=0).replace("echo 0 > state_iter.txt; ", "")]
)
def test_a_counter_file_the_app_never_wrote_is_named(tmp_path: Path, app_cmd: str) -> None:
    """Read as 0, a missing counter file looked like a stall ("stopped at the
    deadline without checkpoint advance (0->0)"): the runner's account names
    the file the app never wrote."""
    chain, settings = _chain(tmp_path, app_cmd, counter=None)
    _, record = _run(tmp_path, chain, settings)
    assert "the app never wrote its counter file state_iter.txt" in record.detail, record.detail


def test_a_counter_file_the_app_wrote_is_not_called_missing(tmp_path: Path) -> None:
    chain, settings = _chain(tmp_path, "echo 3 > state_iter.txt; exit 3", counter=None)
    _, record = _run(tmp_path, chain, settings, clock=time.time)
    assert "counter file" not in record.detail, record.detail


def test_the_runner_names_itself_by_its_number_and_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``chain logs`` heads runner 1's log ``==> runner 1 (job 7)``: the log
    says the same, not the job id as if it were the runner's number."""
    chain, settings = _chain(tmp_path, "echo 150 > state_iter.txt")
    _run(tmp_path, chain, settings, clock=time.time)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("chain runner")]
    assert lines and all(line.startswith("chain runner 1 (job 7): ") for line in lines), lines
    assert any(line.startswith("chain runner 1 (job 7): start, counter 0") for line in lines), lines


def _app_sees(tmp_path: Path, counter: int | None) -> str:
    """What the app's shell expands ``${CHAIN_RESUMING:+--resume}`` to."""
    chain, settings = _chain(
        tmp_path, 'echo "[${CHAIN_RESUMING:+--resume}]" > seen; echo 150 > state_iter.txt', counter=counter
    )
    _run(tmp_path, chain, settings, clock=time.time)
    return (tmp_path / "seen").read_text().strip()


@pytest.mark.parametrize("counter, expected", [(None, "[]"), (0, "[]"), (40, "[--resume]")])
def test_chain_resuming_is_set_when_there_is_a_checkpoint(tmp_path: Path, counter: int | None, expected: str) -> None:
    """The app command runs in a shell: ``${CHAIN_RESUMING:+...}`` works with
    no wrapper. A counter at 0 (or no file) is nothing to resume from."""
    assert _app_sees(tmp_path, counter) == expected


def test_chain_resuming_from_the_submitting_shell_is_not_passed_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAIN_RESUMING", "1")
    assert _app_sees(tmp_path, 0) == "[]"


def test_the_apps_python_is_unbuffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    chain, settings = _chain(tmp_path, 'echo "$PYTHONUNBUFFERED" > seen; echo 150 > state_iter.txt')
    _run(tmp_path, chain, settings, clock=time.time)
    assert (tmp_path / "seen").read_text().strip() == "1"


def test_an_app_that_exits_0_after_a_signal_from_outside_is_judged_by_its_counter(tmp_path: Path) -> None:
    """A SIGTERM from outside (scancel, a preemption's grace) reaches the app as
    the stop signal: an app that saves and exits 0 then has not finished, and
    is never judged 'done' below MAX_ITER (review of the change)."""
    import os
    import signal
    import threading

    chain, settings = _chain(tmp_path, SAVES_ON_TERM.format(saved=75, code=0))

    def send_term_when_ready() -> None:
        while not (tmp_path / "ready").exists():
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)  # to the runner, as Slurm would

    previous = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=send_term_when_ready, daemon=True)
    thread.start()
    try:
        code, record = _run(tmp_path, chain, settings, clock=time.time)
    finally:
        signal.signal(signal.SIGTERM, previous)
    thread.join(5)
    assert record.external_signal == "SIGTERM" and record.app_exit_code == 0
    assert (code, record.iter_after) == (124, 75)
    assert _judge(tmp_path, chain, settings, record).verdict is Verdict.CONTINUE
