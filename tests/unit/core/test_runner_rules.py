"""The runner's pure rules (``chain.core.runner_rules``): its schedule, the
exit contract, the job's exit code and the words for an app's exit."""

import math
from typing import Any

import pytest

from chain.core.runner_rules import (
    LOOK_AHEAD,
    LOOK_FRESH,
    SURE_SHARE,
    app_pace,
    classify_exit,
    completes_here,
    look_fresh,
    plan_schedule,
    successor_look_at,
)


def test_schedule_uses_the_earlier_end() -> None:
    plan = plan_schedule(start=1000, limit=30, margin=10, slurm_end=None)
    assert (plan.end, plan.stop_at) == (1030, 1020)
    assert plan.stop_at < plan.kill_at <= plan.end
    # Slurm's end (rounded up to a minute) is later: the configured limit rules
    assert plan_schedule(1000, 30, 10, slurm_end=1060).end == 1030
    # Slurm's end is earlier (job started late in its window): it rules
    assert plan_schedule(1000, 3600, 60, slurm_end=1500).stop_at == 1440


@pytest.mark.parametrize(
    "app_rc, we_stopped, advanced, expected",
    [
        (0, False, True, 0),
        (0, False, False, 0),
        (99, False, True, 99),
        (75, False, False, 75),
        (3, False, False, 3),
        (99, True, True, 124),
        (143, True, True, 124),
        (137, True, False, 1),
        (99, True, False, 1),
        # an app that exits 0 after the runner's own stop signal stopped
        # because it was asked to: its counter judges it, as for any other code
        (0, True, True, 124),
        (0, True, False, 1),
        (1, True, True, 124),
        (1, True, False, 1),
    ],
)
def test_exit_contract(app_rc: Any, we_stopped: Any, advanced: Any, expected: Any) -> None:
    assert classify_exit(app_rc, we_stopped, advanced) == expected


@pytest.mark.parametrize("app_rc", [0, 99, 143, 1])
def test_an_app_stopped_by_the_runner_at_max_iter_is_done(app_rc: int) -> None:
    assert classify_exit(app_rc, True, True, reached_max=True) == 0
    # on its own, before the signal, the app's code is its word
    assert classify_exit(app_rc, False, True, reached_max=True) == app_rc


def test_runner_job_exits_0_for_the_contracts_handover_codes() -> None:
    """99, 124 and 75 hand over to the next runner: the job is COMPLETED to
    Slurm (no FAIL mail per handoff); failures keep their code."""
    from chain.core.runner_rules import job_exit_code

    assert [job_exit_code(c) for c in (0, 99, 124, 75)] == [0, 0, 0, 0]
    assert [job_exit_code(c) for c in (1, 2, 3, 127, 137)] == [1, 2, 3, 127, 137]


def test_describe_exit_says_whether_the_stop_signal_came_first() -> None:
    from chain.core.runner_rules import describe_exit

    assert (
        describe_exit("app exited 1", 0.42, "TERM", False, None, False)
        == "app exited 1 after 0.4 s, before the stop signal"
    )
    assert (
        describe_exit("app exited 0", 3.0, "TERM", True, "SIGTERM", True)
        == "app exited 0 after SIGTERM (runner got SIGTERM) (killed after the grace period)"
    )


def test_describe_exit_words_success_as_success() -> None:
    """``app exited 0 after 2.3 s, before the stop signal``
    read like a failure."""
    from chain.core.runner_rules import describe_exit

    assert (
        describe_exit("app exited 0", 2.34, "TERM", False, None, False, exit_code=0)
        == "app finished (exit 0) after 2.3 s"
    )
    assert (
        describe_exit("app exited 2", 2.34, "TERM", False, None, False, exit_code=2)
        == "app exited 2 after 2.3 s, before the stop signal"
    )


def test_describe_exit_of_an_app_that_stopped_on_the_signal() -> None:
    """An app that exits by itself once asked to stop stopped on
    the signal, whatever its code; a kill or a signal from outside is said."""
    from chain.core.runner_rules import describe_exit

    assert (
        describe_exit("app exited 0", 9.0, "TERM", True, None, False, exit_code=0)
        == "app stopped on the signal (exit 0) after SIGTERM"
    )
    assert (
        describe_exit("app killed by SIGTERM (exit 143)", 9.0, "TERM", True, None, False)
        == "app killed by SIGTERM (exit 143) after SIGTERM"
    )
    assert (
        describe_exit("app exited 0", 9.0, "USR1", True, "SIGTERM", False, exit_code=0)
        == "app exited 0 after SIGUSR1 (runner got SIGTERM)"
    )


def test_app_pace_is_the_counters_advance_over_the_apps_time() -> None:
    assert app_pace(4, 10, 100.0, 112.0) == 0.5


@pytest.mark.parametrize(
    "before, after, app_start, end",
    [
        (None, 10, 100.0, 112.0),  # a record that does not tell
        (4, None, 100.0, 112.0),
        (4, 10, None, 112.0),
        (4, 10, 100.0, None),
        (4, 4, 100.0, 112.0),  # no advance
        (10, 4, 100.0, 112.0),  # the counter went back
        (4, 10, 112.0, 100.0),  # ended before its app started
        (4, 10, 100.0, 100.0),
        (4, 10, 100.0, float("nan")),
        (4, 10, float("-inf"), 100.0),
        (0, 10**400, 100.0, 112.0),  # numbers past a float
        (-(10**400), 10**400, 100.0, 112.0),
    ],
)
def test_app_pace_of_a_record_that_does_not_tell_is_none(
    before: int | None, after: int | None, app_start: float | None, end: float | None
) -> None:
    assert app_pace(before, after, app_start, end) is None


def test_a_runner_completes_here_when_the_rest_fits_in_its_share_of_the_time() -> None:
    assert SURE_SHARE == 0.5
    assert completes_here(6, 10, 0.5, 16.0)  # 4 left: 8 s of 16
    assert not completes_here(6, 10, 0.5, 15.9)
    assert completes_here(10, 10, 0.5, 1.0)  # nothing left


@pytest.mark.parametrize(
    "pace, seconds",
    [
        (None, 100.0),
        (0.0, 100.0),
        (-1.0, 100.0),
        (float("inf"), 100.0),
        (float("nan"), 100.0),
        (1.0, 0.0),
        (1.0, -5.0),
        (1.0, float("inf")),
        (1.0, float("nan")),
    ],
)
def test_a_runner_is_never_sure_without_a_pace_or_a_finite_time(pace: float | None, seconds: float) -> None:
    assert not completes_here(0, 1, pace, seconds)


def test_completes_here_takes_counters_past_a_float() -> None:
    assert not completes_here(0, 10**400, 1e300, 1e300)
    assert completes_here(10**400 - 1, 10**400, 1.0, 2.0)


def test_the_successor_is_asked_about_shortly_before_the_stop_signal() -> None:
    assert successor_look_at(1000.0) == 1000.0 - LOOK_AHEAD


@pytest.mark.parametrize(
    ("asked", "now", "fresh"),
    [
        (100.0, 100.0, True),
        (100.0, 100.0 + LOOK_FRESH, True),
        (100.0, 100.0 + LOOK_FRESH + 0.001, False),
        (100.0, 99.0, False),  # asked "after" now: a clock that went back, never trusted
        (math.nan, 100.0, False),
        (100.0, math.inf, False),
        (-math.inf, 100.0, False),
    ],
)
def test_an_answer_stands_only_while_fresh(asked: float, now: float, fresh: bool) -> None:
    assert look_fresh(asked, now) is fresh
