from chain.core.margin import MarginState, next_margin


def test_floor_until_something_is_measured() -> None:
    state, why = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=None, killed=False)
    assert state.margin == 60 and "no stop" in why


def test_twice_the_worst_plus_slack() -> None:
    state, _ = next_margin(MarginState(10), floor=10, runner_seconds=3600, stop_to_exit=20.0, killed=False)
    assert state.margin == 45 and state.worst_stop_to_exit == 20.0
    # a faster stop later does not lower it: the worst seen counts
    state, _ = next_margin(state, floor=10, runner_seconds=3600, stop_to_exit=3.0, killed=False)
    assert state.margin == 45


def test_cheap_checkpoints_keep_the_floor() -> None:
    state, _ = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=2.0, killed=False)
    assert state.margin == 60


def test_never_shrinks_after_a_kill() -> None:
    state, _ = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=None, killed=True)
    state, _ = next_margin(state, floor=60, runner_seconds=3600, stop_to_exit=None, killed=False)
    assert state.margin == 120


def test_killed_doubles() -> None:
    state, why = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=None, killed=True)
    assert state.margin == 120 and "killed" in why


def test_capped_at_half_the_runner_time() -> None:
    state, why = next_margin(MarginState(60), floor=60, runner_seconds=300, stop_to_exit=200.0, killed=False)
    assert state.margin == 150 and "capped" in why


def test_a_kill_counts_the_time_given_as_a_lower_bound() -> None:
    """Margin 5 s: the runner kills the app 3.75 s after its stop signal. The
    app needs more than that: 2 x 3.75 + 5 -> 13 s (doubling alone, 10 s,
    would give it only 7.5 s and may be cut again)."""
    state, why = next_margin(MarginState(5), floor=5, runner_seconds=60, stop_to_exit=3.75, killed=True)
    assert state.margin == 13 and state.worst_stop_to_exit == 3.75 and "killed" in why
    # a kill after a short grace still at least doubles
    state, _ = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=45.0, killed=True)
    assert state.margin == 120


def test_the_submitter_counts_a_killed_apps_grace_not_its_time_to_die() -> None:
    """A hung app that took 30 s to die after the kill was given 3.75 s:
    that, not 30 s, is what it is known to need."""
    from chain.core.margin import measured_stop

    measured, killed = measured_stop(stop_sent=1000.0, kill_at=1003.75, stop_to_exit=30.0, external_signal=None,
                                     killed=True, timed_out=False)
    assert (measured, killed) == (3.75, True)
    state, _ = next_margin(MarginState(5), floor=5, runner_seconds=60, stop_to_exit=measured, killed=killed)
    assert state.margin == 13 and state.worst_stop_to_exit == 3.75


def test_only_the_runners_own_stop_measures_the_app() -> None:
    """A stop from outside (scancel, preemption) says nothing about the
    checkpoint time; Slurm's TIMEOUT counts as a kill."""
    from chain.core.margin import measured_stop

    assert measured_stop(stop_sent=10.0, kill_at=20.0, stop_to_exit=4.0, external_signal="SIGTERM",
                         killed=False, timed_out=False) == (None, False)
    assert measured_stop(stop_sent=None, kill_at=None, stop_to_exit=None, external_signal=None,
                         killed=False, timed_out=True) == (None, True)
    assert measured_stop(stop_sent=10.0, kill_at=20.0, stop_to_exit=4.0, external_signal=None,
                         killed=False, timed_out=False) == (4.0, False)
