from typing import Any

"""Pure pieces of the submitter's polling and the runner's schedule."""

from pathlib import Path

import pytest

from chain.core.names import runner_seq
from chain.core.poll import PollPolicy
from chain.core.runner_rules import classify_exit, plan_schedule


def test_poll_is_rare_far_from_the_end_and_dense_near_it() -> None:
    p = PollPolicy(slurm_min=10, slurm_max=300)
    assert p.next_slurm_query(0, None) == 300  # pending: longest interval
    assert p.next_slurm_query(0, 86400) == 300  # far from the end
    assert p.next_slurm_query(0, 100) == 50  # halve the distance
    assert p.next_slurm_query(0, 12) == 10  # never below the minimum
    assert p.next_slurm_query(100, 90) == 110  # past the end: minimum


def test_poll_budget_for_a_24_hour_runner() -> None:
    """At most 12 Slurm queries per runner-hour while the runner runs."""
    p = PollPolicy()
    end = 24 * 3600.0
    t, queries = 0.0, 0
    while t < end:
        t = p.next_slurm_query(t, end)
        queries += 1
    assert queries / 24 <= 12


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


def test_runner_seq_from_job_name() -> None:
    assert runner_seq("chain-abc.r12") == 12
    assert runner_seq("chain-abc.s3") is None
    assert runner_seq("") is None


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


def test_the_app_lock_waits_for_an_earlier_app_then_gives_up(tmp_path: Path) -> None:
    """A process that inherited the lock (an earlier app) keeps it after its
    runner's copy is closed; the next runner waits until the stop time."""
    import subprocess
    import sys

    from chain.jobs.supervise import AppLock

    first = AppLock(str(tmp_path / "app.lock"))
    assert first.acquire(until=0, clock=lambda: 0.0, sleep=lambda s: None)
    app = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=(first.fd,))
    first.close()  # the runner's copy: the app still holds the lock
    try:
        now = [0.0]
        second = AppLock(str(tmp_path / "app.lock"))
        assert not second.acquire(until=10, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
        assert now[0] >= 10
    finally:
        app.kill()
        app.wait()
    assert second.acquire(until=0, clock=lambda: 0.0, sleep=lambda s: None)  # the app is gone: free
    second.close()
