"""Interval policies, cost meter, asynchronous saves and the run log (no sleeping)."""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path

import pytest
from fakes import SteppingClock

from chain.app import (
    AsyncSaver,
    CheckpointPolicy,
    CheckpointStore,
    CostMeter,
    IntervalMode,
    RunLog,
    SaveReason,
    StepSchedule,
    WallClockSchedule,
    lead_seconds,
    overhead_interval,
    read_counter,
    young_daly_interval,
)


def test_formulas() -> None:
    assert young_daly_interval(30, 3600 * 6) == pytest.approx(math.sqrt(2 * 30 * 21600))
    assert overhead_interval(30) == pytest.approx(600)  # 20 * C for 5 %
    assert overhead_interval(2, max_overhead=0.1) == pytest.approx(20)
    assert lead_seconds(30) == 120
    with pytest.raises(ValueError):
        young_daly_interval(1, 0)
    with pytest.raises(ValueError):
        overhead_interval(1, 1.5)


def test_cost_meter_measures_with_injected_clock(caplog: pytest.LogCaptureFixture) -> None:
    clock = SteppingClock(1000.0)
    meter = CostMeter(clock=clock)
    assert meter.last is None and meter.worst == 0.0
    with caplog.at_level("INFO", logger="chain.app.interval"):
        with meter.measure():
            clock.now += 2.5
        with meter.measure():
            clock.now += 0.5
    assert meter.samples == [2.5, 0.5] and meter.worst == 2.5 and meter.mean == 1.5
    assert "C=2.500s" in caplog.text  # the measured cost is logged


def test_step_and_wall_clock_schedules() -> None:
    steps = StepSchedule(5)
    assert [s for s in range(16) if steps.due(s)] == [5, 10, 15]
    assert not StepSchedule(0).due(10)
    clock = SteppingClock(1000.0)
    wall = WallClockSchedule(900, clock)
    clock.now += 899
    assert not wall.due()
    clock.now += 1
    assert wall.due()
    wall.mark_saved()
    assert not wall.due()
    assert not WallClockSchedule(None, clock).due()


def test_policy_combines_steps_and_wall_clock() -> None:
    clock = SteppingClock(1000.0)
    policy = CheckpointPolicy(every_steps=100, every_seconds=600, clock=clock)
    assert policy.due(1) is None
    clock.now += 600  # a slow stretch: the wall clock fires before step 100
    assert policy.due(37) is SaveReason.WALL_CLOCK
    policy.saved()
    assert policy.due(38) is None
    assert policy.due(100) is SaveReason.STEPS


def test_policy_overhead_mode_tracks_measured_cost() -> None:
    clock = SteppingClock(1000.0)
    policy = CheckpointPolicy(mode=IntervalMode.OVERHEAD, every_seconds=3600, clock=clock)
    policy.saved(cost_seconds=12.0)
    assert policy.interval_seconds == pytest.approx(240)  # 20 * C
    policy.saved(cost_seconds=600.0)
    assert policy.interval_seconds == 3600  # capped by every_seconds
    policy.saved(cost_seconds=0.001)
    assert policy.interval_seconds == 1.0  # floored by min_seconds


def test_policy_young_daly_and_shorten() -> None:
    clock = SteppingClock(1000.0)
    policy = CheckpointPolicy(mode=IntervalMode.YOUNG_DALY, mtbf_seconds=7200, clock=clock)
    policy.saved(cost_seconds=4.0)
    assert policy.interval_seconds == pytest.approx(240)  # sqrt(2 * 4 * 7200)
    policy.shorten(0.5)
    assert policy.interval_seconds == pytest.approx(120)
    policy.shorten(0.5)  # does not compound
    assert policy.interval_seconds == pytest.approx(120)
    policy.saved(cost_seconds=4.0)
    assert policy.interval_seconds == pytest.approx(120)  # stays shortened
    with pytest.raises(ValueError):
        CheckpointPolicy(mode=IntervalMode.YOUNG_DALY)


def test_async_saver_one_outstanding_and_staged_copy(tmp_path: Path) -> None:
    release = threading.Event()
    started: list[list[int]] = []

    def slow_save(state: list[int]) -> int:
        started.append(state)
        release.wait(5)
        return len(state)

    saver = AsyncSaver()
    state = [1, 2, 3]
    saver.submit(slow_save, state)
    state.append(4)  # the loop mutates its state at once: the save has a copy
    assert saver.pending
    release.set()
    assert saver.wait() == 3 and started[0] == [1, 2, 3]
    assert not saver.pending

    order: list[str] = []
    gate = threading.Event()

    def first(_: object) -> None:
        gate.wait(5)
        order.append("first")

    def second(_: object) -> None:
        order.append("second")

    saver.submit(first, None)
    threading.Timer(0.05, gate.set).start()
    saver.submit(second, None)  # waits for the first: never two outstanding
    assert order == ["first"]
    saver.close()
    assert order == ["first", "second"]


def test_async_saver_error_surfaces_and_store_counter_order(tmp_path: Path) -> None:
    def fail(_: object) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError), AsyncSaver() as saver:
        saver.submit(fail, None)
    store = CheckpointStore(tmp_path / "ck", counter_path=tmp_path / "ctr", durable=False)
    with AsyncSaver() as saver:
        for step in (1, 2, 3):
            saver.submit(lambda s: store.save(s["step"], s), {"step": step})
    assert read_counter(tmp_path / "ctr") == 3  # waited on before leaving the block


def test_run_log_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    log = RunLog(path, job_id="4242", clock=lambda: 1_800_000_000.25)
    log.start(0)
    log.checkpoint(20, tmp_path / "ck" / "ckpt-20.ckpt", warning_present=True, cost=0.5)
    RunLog(path, job_id="4243", clock=lambda: 1_800_000_100.0).stop(20, 99, "signal")
    lines = path.read_text().splitlines()
    assert len(lines) == 3  # appended across instances
    ts = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert re.fullmatch(ts + r" job=4242 pid=\d+ event=start step=0", lines[0])
    assert re.fullmatch(
        ts + r" job=4242 pid=\d+ event=checkpoint step=20 path=\S+ckpt-20\.ckpt warning=yes cost=0\.500",
        lines[1],
    )
    assert lines[2].endswith("event=exit step=20 code=99 reason=signal") and "job=4243" in lines[2]
