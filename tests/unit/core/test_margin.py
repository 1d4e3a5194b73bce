"""The adaptive margin (``chain.core.margin``), with literal numbers."""

from __future__ import annotations

from pathlib import Path

from fakes import FakeBackend

from chain import api
from chain.core.decision import Outcome, Policy, Tally, Verdict, decide
from chain.core.margin import (
    MarginState,
    StopTimes,
    does_not_fit,
    margin_cap,
    measured_stop,
    next_margin,
    startup_seconds,
)
from chain.core.model import ChainState
from chain.core.records import RunnerPhase, RunnerRecord
from chain.effects.ending import record_judgment
from chain.effects.executor import Executor
from chain.store import ChainDir, ChainStatus


def test_floor_until_something_is_measured() -> None:
    step = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop=StopTimes())
    assert step.state.margin == 60 and "no stop" in step.why and not step.warning


def test_twice_the_worst_plus_slack() -> None:
    step = next_margin(MarginState(10), floor=10, runner_seconds=3600, stop=StopTimes(exited=20.0))
    assert step.state.margin == 45 and step.state.worst_stop_to_exit == 20.0
    # a faster stop later does not lower it: the worst seen counts
    step = next_margin(step.state, floor=10, runner_seconds=3600, stop=StopTimes(exited=3.0))
    assert step.state.margin == 45


def test_cheap_checkpoints_keep_the_floor() -> None:
    step = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop=StopTimes(exited=2.0))
    assert step.state.margin == 60


def test_never_shrinks_after_a_kill() -> None:
    step = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop=StopTimes(killed=True))
    step = next_margin(step.state, floor=60, runner_seconds=3600, stop=StopTimes())
    assert step.state.margin == 120


def test_killed_doubles() -> None:
    step = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop=StopTimes(killed=True))
    assert step.state.margin == 120 and "killed" in step.why


def test_capped_at_half_the_runner_time() -> None:
    step = next_margin(MarginState(60), floor=60, runner_seconds=300, stop=StopTimes(exited=200.0))
    assert step.state.margin == 150 and "capped at 150s" in step.why


def test_a_kill_counts_the_time_given_as_a_lower_bound() -> None:
    """Margin 5 s: the runner kills the app 3.75 s after its stop signal. The
    app needs more than that: 2 x 3.75 + 5 -> 13 s (doubling alone, 10 s,
    would give it only 7.5 s and may be cut again)."""
    step = next_margin(MarginState(5), floor=5, runner_seconds=60, stop=StopTimes(exited=3.75, killed=True))
    assert step.state.margin == 13 and step.state.worst_stop_to_exit == 3.75 and "killed" in step.why
    # a kill after a short grace still at least doubles
    step = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop=StopTimes(exited=45.0, killed=True))
    assert step.state.margin == 120


def test_the_submitter_counts_a_killed_apps_grace_not_its_time_to_die() -> None:
    """A hung app that took 30 s to die after the kill was given 3.75 s:
    that, not 30 s, is what it is known to need."""
    stop = measured_stop(
        stop_sent=1000.0, kill_at=1003.75, stop_to_exit=30.0, external_signal=None, killed=True, timed_out=False
    )
    assert stop == StopTimes(exited=3.75, killed=True)
    step = next_margin(MarginState(5), floor=5, runner_seconds=60, stop=stop)
    assert step.state.margin == 13 and step.state.worst_stop_to_exit == 3.75


def test_only_the_runners_own_stop_measures_the_app() -> None:
    """A stop from outside (scancel, preemption) says nothing about the
    checkpoint time; Slurm's TIMEOUT counts as a kill."""
    assert (
        measured_stop(
            stop_sent=10.0, kill_at=20.0, stop_to_exit=4.0, external_signal="SIGTERM", killed=False, timed_out=False
        )
        == StopTimes()
    )
    assert measured_stop(
        stop_sent=None, kill_at=None, stop_to_exit=None, external_signal=None, killed=False, timed_out=True
    ) == StopTimes(killed=True)
    assert measured_stop(
        stop_sent=10.0, kill_at=20.0, stop_to_exit=4.0, external_signal=None, killed=False, timed_out=False
    ) == StopTimes(exited=4.0)


# --- a complete save, then a slow exit ----------------------------------------------------------


def _stop(
    *, saved_at: float | None, advanced: bool = True, killed: bool = False, stop_to_exit: float = 9.8
) -> StopTimes:
    """The runner sent its stop at 1000.0 and would kill the app at 1007.5."""
    return measured_stop(
        stop_sent=1000.0,
        kill_at=1007.5,
        stop_to_exit=stop_to_exit,
        external_signal=None,
        killed=killed,
        timed_out=False,
        saved_at=saved_at,
        advanced=advanced,
    )


def test_the_save_is_the_counter_files_mtime_between_the_stop_and_the_exit() -> None:
    """Counter file written at 1002.5, exit at 1009.8: saved 2.5 s after the
    stop. A file written before the stop (a periodic save), after the exit,
    or a counter that did not advance, says nothing about the stop's save."""
    stop = _stop(saved_at=1002.5)
    assert stop == StopTimes(exited=9.8, saved=2.5) and stop.checkpointed == 2.5
    assert _stop(saved_at=998.0).saved is None
    assert _stop(saved_at=1002.5, advanced=False).saved is None
    assert _stop(saved_at=1012.0).saved is None
    assert _stop(saved_at=None).saved is None


def test_a_slow_exit_after_a_complete_save_is_covered_once_and_said() -> None:
    """Saved 2.1 s after the stop, exited 9.8 s after it: the margin covers
    the exit once (9.8 + 5 -> 15 s), not twice over as a slow save would be
    (2 x 9.8 + 5 -> 25 s); the log line says why."""
    step = next_margin(MarginState(10), floor=10, runner_seconds=3600, stop=StopTimes(exited=9.8, saved=2.1))
    assert step.state.margin == 15 and step.state.worst_stop_to_exit == 2.1
    assert step.why == "the app saved 2.1s after the stop but exited 9.8s after it: a slow exit, not a slow save"
    assert not step.warning
    # without the save's time, the exit is all chain knows: twice over
    assert next_margin(MarginState(10), floor=10, runner_seconds=3600, stop=StopTimes(exited=9.8)).state.margin == 25


def test_a_kill_after_a_complete_save_is_not_a_kill_before_the_checkpoint() -> None:
    """Margin 10 s (7.5 s of grace): the app saved 2.5 s after the stop and
    was killed at 7.5 s, still exiting. Nothing was lost, and the log says so;
    but 7.5 s is only a lower bound of its exit: doubled as for any kill (20 s,
    not 7.5 + 5 = 13 s, which would kill it at every runner again)."""
    stop = _stop(saved_at=1002.5, killed=True, stop_to_exit=30.0)
    assert stop.killed and not stop.killed_mid_save and stop.exited == 7.5
    step = next_margin(MarginState(10), floor=10, runner_seconds=3600, stop=stop)
    assert step.state.margin == 20
    assert step.why == (
        "the app saved 2.5s after the stop and was killed 7.5s after it, still exiting: "
        "its checkpoint was complete, nothing was lost"
    )
    # the same kill with no save after the stop: before its checkpoint, doubled
    step = next_margin(MarginState(10), floor=10, runner_seconds=3600, stop=_stop(saved_at=998.0, killed=True))
    assert step.state.margin == 20 and step.why == "the app was killed before it finished its checkpoint"


# --- the cap: start-up + margin leave half the runner for work -----------------------------------


def test_the_cap_counts_the_runners_start_up() -> None:
    """A 40 s runner whose app starts 6.5 s after the runner: at most
    floor(20 - 6.5) = 13 s of margin, so 6.5 + 13 leaves 20.5 s for work
    (the old cap, half the runner, gave 20 s and left 13.5 s)."""
    assert margin_cap(5, 40, 6.5) == 13
    assert margin_cap(5, 40, 0.0) == 20
    assert margin_cap(5, 40, 30.0) == 5  # never below the configured margin
    step = next_margin(MarginState(5), floor=5, runner_seconds=40, stop=StopTimes(exited=6.0), startup=6.5)
    assert step.state.margin == 13
    assert step.why == (
        "worst stop-to-checkpoint 6.0s; capped at 13s: start-up 6.5s + margin leave half the 40s runner for work"
    )
    # a margin raised before this start-up was seen is never taken back: a slow start-up
    # (a take-over riding out an outage) must not shrink it
    assert next_margin(MarginState(20), floor=5, runner_seconds=40, stop=StopTimes(), startup=6.5).state.margin == 20


def test_start_up_is_the_records_start_to_the_apps_start() -> None:
    assert startup_seconds(1000.0, 1006.5) == 6.5
    assert startup_seconds(1000.0, None) is None and startup_seconds(None, 1006.5) is None
    assert startup_seconds(1000.0, 999.0) is None


# --- the app's stop does not fit: the chain says so at every runner ------------------------------


def test_a_stop_that_does_not_fit_in_the_largest_margin_is_a_warning() -> None:
    """The issue's case, a 40 s runner. Start-up 1.0 s: the largest margin
    is 19 s, 14.25 s of grace (the runner keeps 4.75 s). A 12 s stop fits;
    a 15 s one does not: the warning names the numbers and the fixes
    (2 x 15 + 5 = 35 s of margin: a runner of 2 x (1 + 35) = 72 s)."""
    assert does_not_fit(12.0, 19, runner_seconds=40, startup=1.0) == ""
    warning = does_not_fit(15.0, 19, runner_seconds=40, startup=1.0)
    assert warning == (
        "the app needs 15.0s after the stop signal to checkpoint but a 40s runner can give it 14.2s "
        "(margin 19s: start-up 1.0s + margin leave half the runner for work): it may be killed before its "
        "checkpoint at every runner; use --runner-time 0:01:12 or longer (a 35s margin), a faster checkpoint, "
        "or --fixed-margin with a --runner-margin of your choice"
    )
    step = next_margin(MarginState(5), floor=5, runner_seconds=40, stop=StopTimes(exited=15.0), startup=1.0)
    assert step.state.margin == 19 and step.warning == warning
    # said again at the next runner, with nothing new measured
    assert (
        next_margin(step.state, floor=5, runner_seconds=40, stop=StopTimes(exited=3.0), startup=1.0).warning == warning
    )


def test_a_margin_held_below_twice_the_stop_is_no_warning() -> None:
    """8 s of stop wants 2 x 8 + 5 = 21 s; the cap holds it at 19 s, whose
    14.25 s of grace still let the app save: the runner works half its time."""
    step = next_margin(MarginState(5), floor=5, runner_seconds=40, stop=StopTimes(exited=8.0), startup=1.0)
    assert step.state.margin == 19 and "capped" in step.why and not step.warning


def test_a_kill_before_the_checkpoint_at_the_largest_margin_is_a_warning() -> None:
    """Already at the cap (19 s), the app is killed 14.25 s after the stop
    with no save after it: the runner cannot give more."""
    step = next_margin(
        MarginState(19, 8.0), floor=5, runner_seconds=40, stop=StopTimes(exited=14.25, killed=True), startup=1.0
    )
    assert step.state.margin == 19
    assert step.warning.startswith(
        "the app was killed 14.2s after the stop signal, before its checkpoint was "
        "complete, with the largest margin a 40s runner can give (margin 19s"
    )
    assert "--runner-time 0:01:18 or longer (a 38s margin)" in step.warning
    # killed below the cap: the margin is raised instead, no warning
    step = next_margin(
        MarginState(10), floor=5, runner_seconds=40, stop=StopTimes(exited=7.5, killed=True), startup=1.0
    )
    assert step.state.margin == 19 and not step.warning


# --- wired: the submitter's and the relay's judgment (effects.ending) --------------------------------


def _judge(tmp_path: Path, record: RunnerRecord, *, runner_time: str, margin: int) -> tuple[ChainDir, ChainStatus]:
    """Runner 1 (job 7) ended with ``record``; judged as both modes do."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings(
        {"app_cmd": "true", "max_iter": 100, "backend": "local", "runner_time": runner_time, "runner_margin": margin},
        {},
        None,
        tmp_path,
    )
    status = ChainStatus(
        chain_id="c-1",
        workdir=str(tmp_path),
        backend="local",
        state=ChainState.RUNNING,
        runner_seq=1,
        runner_job_id="7",
        runner_live=True,
    )
    record.status, record.exit_code, record.end = RunnerPhase.ENDED, 124, (record.stop_sent or 0.0) + 20
    chain.write_runner_record(record)
    outcome = Outcome(
        exit_code=124, slurm_state=None, iter_before=record.iter_before or 0, iter_after=record.iter_after or 0
    )
    decision = decide(outcome, Policy(100), Tally())
    assert decision.verdict is Verdict.CONTINUE
    record_judgment(Executor(chain, FakeBackend()), settings, status, outcome, decision)
    return chain, status


def test_the_judgment_logs_a_slow_exit_as_such(tmp_path: Path) -> None:
    record = RunnerRecord(
        "7",
        start=1000.0,
        app_start=1000.5,
        stop_sent=1020.0,
        stop_to_exit=9.8,
        saved_at=1022.5,
        iter_before=3,
        iter_after=9,
        margin=10,
    )
    chain, status = _judge(tmp_path, record, runner_time="1:00:00", margin=10)
    assert status.margin == 15 and status.reason == ""
    assert (
        "runner margin 10s -> 15s (the app saved 2.5s after the stop but exited 9.8s after it: "
        "a slow exit, not a slow save)"
    ) in chain.log_file.read_text()


def test_the_judgment_says_when_the_stop_does_not_fit_and_status_shows_it(tmp_path: Path) -> None:
    """A 40 s runner whose app took 15 s to checkpoint after the stop."""
    record = RunnerRecord(
        "7", start=1000.0, app_start=1001.0, stop_sent=1021.0, stop_to_exit=15.0, iter_before=3, iter_after=4, margin=5
    )
    chain, status = _judge(tmp_path, record, runner_time="0:40", margin=5)
    assert status.margin == 19 and status.worst_startup == 1.0 and status.state is ChainState.RUNNING
    assert status.reason.startswith("margin does not fit: the app needs 15.0s after the stop signal")
    assert f"runner 1: {status.reason}" in chain.log_file.read_text()
    saved = chain.load_status()
    assert saved is not None and saved.reason == status.reason


def test_the_slowest_start_up_seen_bounds_the_margin() -> None:
    """Start-up 6.5 s once, 0.2 s after: the cap stays at 13 s (a cap that
    followed each start-up would move the margin 13 -> 19 -> 13 ...)."""
    step = next_margin(MarginState(5), floor=5, runner_seconds=40, stop=StopTimes(exited=8.0), startup=6.5)
    assert step.state == MarginState(13, 8.0, 6.5)
    step = next_margin(step.state, floor=5, runner_seconds=40, stop=StopTimes(exited=8.0), startup=0.2)
    assert step.state == MarginState(13, 8.0, 6.5)
