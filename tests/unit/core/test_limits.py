"""A site's per-user job limits against what a chain needs (chain.core.limits),
and ``chain submit`` refusing, before anything is written, a chain they leave
no room for ("If a site's limits leave no way to run a submitter
beside a runner, chain submit says so and names relay mode")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from chain import Chain
from chain.core.limits import JobLimits, Limit, Room, room
from chain.core.settings import Mode
from chain.errors import ConfigError
from chain.modes import driver, least_needs

QUEUED = "association MaxSubmitJobs"
RUNNING = "QOS normal MaxJobsPerUser"


def _limits(queued: int | None = None, running: int | None = None) -> JobLimits:
    return JobLimits(
        queued=Limit(queued, QUEUED) if queued is not None else None,
        running=Limit(running, RUNNING) if running is not None else None,
    )


def _room(mode: Mode, *, lookahead: bool, step_aside_after: int, limits: JobLimits | None) -> Room:
    """``core.limits.room`` for a chain of ``mode``, as ``chain submit`` asks it."""
    return room(driver(mode).needs(lookahead), least_needs(), step_aside_after=step_aside_after, limits=limits)


def _needs(mode: Mode, lookahead: bool) -> tuple[int, int]:
    needs = driver(mode).needs(lookahead)
    return needs.queued, needs.running


def test_what_each_mode_needs_at_its_busiest() -> None:
    assert _needs(Mode.SUBMITTER, False) == (3, 2)  # submitter, runner, successor at a handover
    assert _needs(Mode.SUBMITTER, True) == (4, 2)  # and the runner queued ahead
    assert _needs(Mode.RELAY, False) == (2, 1)  # the runner and its queued successor
    assert _needs(Mode.RELAY, True) == (2, 1)  # relay always queues one ahead
    assert least_needs() == driver(Mode.RELAY).needs(False)


@pytest.mark.parametrize("mode", list(Mode))
def test_no_limits_or_ample_ones_leave_room(mode: Mode) -> None:
    assert _room(mode, lookahead=False, step_aside_after=60, limits=None) == Room()
    assert _room(mode, lookahead=True, step_aside_after=60, limits=JobLimits()) == Room()
    assert _room(mode, lookahead=True, step_aside_after=0, limits=_limits(queued=4, running=2)) == Room()


def test_a_submit_limit_below_a_handover_refuses_submitter_mode_and_names_relay() -> None:
    verdict = _room(Mode.SUBMITTER, lookahead=False, step_aside_after=60, limits=_limits(queued=2))
    assert verdict.refusal is not None and verdict.warning is None
    assert "association MaxSubmitJobs=2" in verdict.refusal and "--mode relay" in verdict.refusal
    assert "needs 3" in verdict.refusal
    # relay fits in the same limit
    assert _room(Mode.RELAY, lookahead=False, step_aside_after=60, limits=_limits(queued=2)) == Room()


def test_lookahead_needs_one_more_queued_job() -> None:
    verdict = _room(Mode.SUBMITTER, lookahead=True, step_aside_after=60, limits=_limits(queued=3))
    assert verdict.refusal is not None and "with --lookahead" in verdict.refusal and "needs 4" in verdict.refusal
    assert _room(Mode.SUBMITTER, lookahead=False, step_aside_after=60, limits=_limits(queued=3)) == Room()


@pytest.mark.parametrize("mode", list(Mode))
def test_a_submit_limit_of_one_leaves_no_room_for_any_chain(mode: Mode) -> None:
    verdict = _room(mode, lookahead=False, step_aside_after=60, limits=_limits(queued=1))
    assert verdict.refusal is not None and "no room for a chain" in verdict.refusal
    assert "--mode relay" not in verdict.refusal  # relay would not fit either


def test_one_running_job_makes_the_submitter_step_aside_or_refuses_without_it() -> None:
    slow = _room(Mode.SUBMITTER, lookahead=False, step_aside_after=30, limits=_limits(running=1))
    assert slow.refusal is None and slow.warning is not None
    assert f"{RUNNING}=1" in slow.warning and "after 30s" in slow.warning and "--mode relay" in slow.warning
    stuck = _room(Mode.SUBMITTER, lookahead=False, step_aside_after=0, limits=_limits(running=1))
    assert stuck.refusal is not None and "--mode relay" in stuck.refusal
    assert _room(Mode.RELAY, lookahead=False, step_aside_after=0, limits=_limits(running=1)) == Room()


def test_the_queued_limit_is_judged_before_the_running_one() -> None:
    verdict = _room(Mode.SUBMITTER, lookahead=False, step_aside_after=0, limits=_limits(queued=2, running=1))
    assert verdict.refusal is not None and QUEUED in verdict.refusal


# --- chain submit ------------------------------------------------------------------

BASE: dict[str, Any] = {
    "app_cmd": "true",
    "max_iter": 10,
    "runner_time": "10:00",
    "partition": "debug",
    "account": "lab",
    "qos": "long",
}


def test_submit_refuses_before_writing_anything(tmp_path: Path) -> None:
    fake = FakeBackend()
    fake.limits = _limits(queued=2)
    with pytest.raises(ConfigError, match="--mode relay"):
        Chain.submit(tmp_path / "w", backend=fake, **BASE)
    assert fake.submitted == [] and not (tmp_path / "w" / ".chain").exists()
    assert fake.limits_asked == [("lab", "long", "debug")]  # the chain's own account, QOS and partition


def test_submit_in_relay_mode_fits_where_submitter_mode_does_not(tmp_path: Path) -> None:
    fake = FakeBackend()
    fake.limits = _limits(queued=2)
    run = Chain.submit(tmp_path / "w", backend=fake, mode="relay", **BASE)
    assert run.chain_id and len(fake.submitted) == 2  # runner 1 and its successor


def test_submit_says_when_the_limits_only_slow_the_chain(tmp_path: Path) -> None:
    fake = FakeBackend()
    fake.limits = _limits(running=1)
    lines: list[str] = []
    from chain.api.submission import submit

    workdir = tmp_path / "w"
    workdir.mkdir()
    submit(
        {k: v for k, v in BASE.items()},
        {},
        config=None,
        chain_dir=workdir / ".chain",
        workdir=workdir,
        notify=lines.append,
        backend=fake,
    )
    assert any("take turns" in line and "--mode relay" in line for line in lines), lines
    assert fake.submitted  # submitted all the same
