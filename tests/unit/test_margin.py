from chain.core.margin import MarginState, next_margin


def test_floor_until_something_is_measured():
    state, why = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=None, killed=False)
    assert state.margin == 60 and "no stop" in why


def test_twice_the_worst_plus_slack():
    state, _ = next_margin(MarginState(10), floor=10, runner_seconds=3600, stop_to_exit=20.0, killed=False)
    assert state.margin == 45 and state.worst_stop_to_exit == 20.0
    # a faster stop later does not lower it: the worst seen counts
    state, _ = next_margin(state, floor=10, runner_seconds=3600, stop_to_exit=3.0, killed=False)
    assert state.margin == 45


def test_cheap_checkpoints_keep_the_floor():
    state, _ = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=2.0, killed=False)
    assert state.margin == 60


def test_never_shrinks_after_a_kill():
    state, _ = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=None, killed=True)
    state, _ = next_margin(state, floor=60, runner_seconds=3600, stop_to_exit=None, killed=False)
    assert state.margin == 120


def test_killed_doubles():
    state, why = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=None, killed=True)
    assert state.margin == 120 and "killed" in why


def test_capped_at_half_the_runner_time():
    state, why = next_margin(MarginState(60), floor=60, runner_seconds=300, stop_to_exit=200.0, killed=False)
    assert state.margin == 150 and "capped" in why


def test_a_kill_counts_the_time_given_as_a_lower_bound():
    """Margin 5 s: the runner kills the app 3.75 s after its stop signal. The
    app needs more than that: 2 x 3.75 + 5 -> 13 s (doubling alone, 10 s,
    would give it only 7.5 s and may be cut again)."""
    state, why = next_margin(MarginState(5), floor=5, runner_seconds=60, stop_to_exit=3.75, killed=True)
    assert state.margin == 13 and state.worst_stop_to_exit == 3.75 and "killed" in why
    # a kill after a short grace still at least doubles
    state, _ = next_margin(MarginState(60), floor=60, runner_seconds=3600, stop_to_exit=45.0, killed=True)
    assert state.margin == 120


def test_the_submitter_counts_a_killed_apps_grace_not_its_time_to_die(tmp_path):
    """A hung app that took 30 s to die after the kill was given 3.75 s:
    that, not 30 s, is what it is known to need."""
    from chain import api
    from chain.core.decision import Outcome
    from chain.jobs.submitter import Submitter
    from chain.store import ChainDir, ChainStatus

    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = api.load_settings({"app_cmd": "true", "max_iter": 10, "runner_time": "1:00", "runner_margin": 5},
                                 {}, None, tmp_path)
    status = ChainStatus(chain_id="c-1", workdir=str(tmp_path), margin=5)
    from fakes import FakeBackend

    sub = Submitter(chain, settings, FakeBackend(), tmp_path, "5", sleep=lambda s: None)
    record = {"stop_sent": 1000.0, "kill_at": 1003.75, "stop_to_exit": 30.0, "killed": True}
    sub._adapt_margin(status, record, Outcome(exit_code=124, slurm_state=None, iter_before=0, iter_after=5))
    assert status.margin == 13 and status.worst_stop_to_exit == 3.75
