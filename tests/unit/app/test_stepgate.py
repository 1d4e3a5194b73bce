"""The contract at a step boundary (``chain.app.stepgate.StepGate``): save
now? exit now, with which code? On a real StopMonitor and policy with
injected clocks (only the gap between two checks is real time: microseconds
here, nothing in the lead)."""

from __future__ import annotations

import signal
from pathlib import Path

from chain.app.interval import CheckpointPolicy, CostMeter
from chain.app.stepgate import StepGate
from chain.app.stop import StopMonitor

NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _gate(
    tmp_path: Path,
    clock: Clock,
    *,
    deadline: float | None = None,
    every_steps: int = 0,
    every_seconds: float | None = None,
) -> StepGate:
    monitor = StopMonitor(tmp_path / "podinfo", deadline=deadline, clock=clock, environ={})
    policy = CheckpointPolicy(every_steps=every_steps, every_seconds=every_seconds, clock=clock)
    return StepGate(monitor, policy, margin_seconds=5.0, meter=CostMeter(clock=clock))


def test_the_policys_schedule_asks_for_a_save_and_no_exit(tmp_path: Path) -> None:
    gate = _gate(tmp_path, Clock(), every_steps=5)
    assert [gate.check(n) for n in (3, 4, 5, 6)] == [(False, None), (False, None), (True, None), (False, None)]
    assert gate.check(None) == (False, None)  # no count: the step schedule is not asked


def test_a_stop_signal_asks_for_a_save_and_exit_99(tmp_path: Path) -> None:
    gate = _gate(tmp_path, Clock())
    assert gate.check(1) == (False, None)
    gate.monitor.request_stop(signal.SIGTERM)
    assert gate.check(2) == (True, 99)


def test_the_lead_before_the_deadline_grows_with_the_slowest_save(tmp_path: Path) -> None:
    clock = Clock()
    gate = _gate(tmp_path, clock, deadline=NOW + 100.0)
    assert gate.check(1) == (False, None) and 5.0 <= gate.lead() < 6.0
    with gate.measure():  # one save of 40 s
        clock.now += 40.0
    assert gate.meter.worst == 40.0 and gate.lead() >= 85.0  # two saves and the margin
    assert gate.check(2) == (True, 99)  # 60 s left: a save started later would not finish


def test_a_near_termination_warning_asks_for_a_save_and_exit_75(tmp_path: Path) -> None:
    clock = Clock()
    gate = _gate(tmp_path, clock)
    (tmp_path / "podinfo").mkdir()
    (tmp_path / "podinfo" / "termination-warning-at").write_text(str(NOW + 3600.0))
    assert gate.check(1) == (False, None)  # far off: present, not yet a reason
    clock.now = NOW + 3600.0 - 30.0
    assert gate.check(2) == (True, 75)  # within the lead and the warning's margin: stop, hand capacity back


def test_once_the_guarantee_has_expired_the_interval_is_halved(tmp_path: Path) -> None:
    gate = _gate(tmp_path, Clock(), every_seconds=600.0)
    (tmp_path / "podinfo").mkdir()
    (tmp_path / "podinfo" / "guaranteed-until").write_text("2027-06-01T00:00:00Z")  # months after NOW
    assert gate.check(1) == (False, None) and gate.policy.interval_seconds == 600.0
    (tmp_path / "podinfo" / "guaranteed-until").write_text(str(NOW - 1.0))
    assert gate.check(2) == (False, None)  # preemptible without notice now: not a stop
    assert gate.policy.interval_seconds == 300.0
    assert gate.check(3) == (False, None) and gate.policy.interval_seconds == 300.0  # once, not again
