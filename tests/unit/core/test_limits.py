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
from chain.errors import ChainError, ConfigError
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


def _specs(tmp_path: Path, n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"workdir": tmp_path / f"p{i}", **BASE, "mode": "relay", **extra} for i in range(n)]


def test_a_sweep_asks_the_limits_once_and_each_chain_alone_asks_again(tmp_path: Path) -> None:
    fake = FakeBackend()
    fake.limits = _limits(queued=2)
    Chain.submit_many(_specs(tmp_path / "a", 8), parallel=3, backend=fake)
    assert fake.limits_asked == [("lab", "long", "debug")] and len(fake.submitted) == 16
    Chain.submit_many(_specs(tmp_path / "b", 2), backend=fake)  # another batch: the site may have changed them
    Chain.submit(tmp_path / "c", backend=fake, mode="relay", **BASE)
    Chain.submit(tmp_path / "d", backend=fake, mode="relay", **BASE)
    assert len(fake.limits_asked) == 4


def test_a_sweep_asks_again_for_another_partition_and_refuses_with_the_limits_it_was_given(tmp_path: Path) -> None:
    fake = FakeBackend()
    fake.limits = _limits(queued=2)
    specs = _specs(tmp_path, 3) + [{**_specs(tmp_path / "x", 1)[0], "partition": "gpu", "mode": "submitter"}]
    with pytest.raises(ChainError, match=r"1 of 4 chains were not submitted \(.*--mode relay"):
        Chain.submit_many(specs, parallel=2, backend=fake)
    assert sorted(fake.limits_asked) == [("lab", "long", "debug"), ("lab", "long", "gpu")]


def test_the_memo_asks_once_while_another_thread_waits_for_its_answer() -> None:
    import threading

    from chain.api.config import LimitsMemo
    from chain.core.resolution import resolve

    memo = LimitsMemo()
    settings = resolve({"app_cmd": "true", "max_iter": 10, "partition": "debug"}, {}, {})
    other: list[JobLimits | None] = []
    waited: list[bool] = []
    started: list[threading.Thread] = []

    class Asked(FakeBackend):
        def job_limits(self, *, account: str = "", qos: str = "", partition: str = "") -> JobLimits | None:
            if not self.limits_asked:  # while the first ask is under way, another thread asks
                thread = threading.Thread(target=lambda: other.append(memo.limits(settings, self)))
                thread.start()
                thread.join(timeout=0.2)
                waited.append(thread.is_alive())
                started.append(thread)
            return super().job_limits(account=account, qos=qos, partition=partition)

    fake = Asked()
    fake.limits = _limits(running=3)
    assert memo.limits(settings, fake) == fake.limits
    started[0].join()
    assert waited == [True] and other == [fake.limits] and fake.limits_asked == [("", "", "debug")]
