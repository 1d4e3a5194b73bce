"""The runner's pure rules (``chain.core.runner_rules``): its schedule, the
exit contract, the job's exit code and the words for an app's exit."""

from typing import Any

import pytest

from chain.core.runner_rules import classify_exit, plan_schedule


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
