"""StopMonitor: every podinfo rule of the user guide, with real files."""

from __future__ import annotations

import os
import signal
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from chain.app import ExitCode, StopMonitor, StopReason, parse_instant

NOW = 1_800_000_000.0  # a fixed clock: tests never depend on the real time


def iso(offset: float, fmt: str = "Z") -> str:
    t = datetime.fromtimestamp(NOW + offset, tz=timezone.utc).replace(microsecond=0)
    if fmt == "Z":
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")  # the controller's format
    if fmt == "offset":
        return t.astimezone(timezone(timedelta(hours=2))).isoformat()
    return t.replace(tzinfo=None).isoformat()  # no zone: read as UTC


def monitor(podinfo: Path, **kw: object) -> StopMonitor:
    kw.setdefault("environ", {})
    return StopMonitor(podinfo, clock=lambda: NOW, **kw)  # type: ignore[arg-type]


def test_no_podinfo_directory_means_no_stop(tmp_path: Path) -> None:
    m = monitor(tmp_path / "missing")
    st = m.status(600)
    assert not st.expected and not st.warning_present and st.exit_code is None


def test_empty_files_are_absent_annotations(podinfo: Path) -> None:
    # all four files exist and are empty, as when the pod starts
    m = monitor(podinfo)
    assert not m.stop_expected(10_000)
    assert not m.warning_present()


@pytest.mark.parametrize("fmt", ["Z", "offset", "naive"])
def test_warning_within_lead_stops_with_75(podinfo: Path, fmt: str) -> None:
    (podinfo / "termination-warning-at").write_text(iso(120, fmt))
    (podinfo / "termination-warning-message").write_text("booking due")
    st = monitor(podinfo).status(lead_seconds=300)
    assert st.reasons == {StopReason.TERMINATION_WARNING}
    assert st.exit_code is ExitCode.TEMPFAIL and st.warning_present
    assert st.message == "booking due"


def test_warning_beyond_lead_is_present_but_not_urgent(podinfo: Path) -> None:
    (podinfo / "termination-warning-at").write_text(iso(3600))
    st = monitor(podinfo).status(lead_seconds=300)
    assert not st.expected and st.warning_present


def test_stale_warning_in_the_past_is_ignored(podinfo: Path) -> None:
    (podinfo / "termination-warning-at").write_text(iso(-30))
    m = monitor(podinfo)
    st = m.status(lead_seconds=300)
    assert not st.expected and not st.warning_present
    # unless the caller allows a grace for the kubelet's refresh delay
    graced = monitor(podinfo, stale_grace_seconds=60).status(lead_seconds=300)
    assert graced.reasons == {StopReason.TERMINATION_WARNING}


@pytest.mark.parametrize("value", ["soon", "2026-13-45T99:00:00Z", "\n", "  ", "nan-ish 12"])
def test_unparseable_value_is_ignored(podinfo: Path, value: str) -> None:
    (podinfo / "termination-warning-at").write_text(value)
    (podinfo / "guaranteed-until").write_text(value)
    st = monitor(podinfo).status(lead_seconds=10_000)
    assert not st.expected and not st.warning_present and not st.guarantee_expired


def test_warning_withdrawn_between_two_calls(podinfo: Path) -> None:
    m = monitor(podinfo)
    warn = podinfo / "termination-warning-at"
    warn.write_text(iso(60))
    assert m.stop_expected(300)
    warn.write_text("")  # withdrawn: the file is emptied, not removed
    assert not m.stop_expected(300)
    warn.write_text(iso(60))
    assert m.stop_expected(300)
    warn.unlink()  # a hand-written pod spec may not have the file at all
    assert not m.stop_expected(300)


def test_symlink_swap_is_reread(podinfo: Path, tmp_path: Path) -> None:
    # the kubelet swaps the whole set behind a symlink; values are re-read
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "termination-warning-at").write_text(iso(60))
    (b / "termination-warning-at").write_text("")
    link = tmp_path / "link"
    link.symlink_to(a)
    m = monitor(link)
    assert m.stop_expected(300)
    tmp = tmp_path / "link.new"
    tmp.symlink_to(b)
    os.replace(tmp, link)
    assert not m.stop_expected(300)


def test_guaranteed_until_near_is_a_save_not_a_stop(podinfo: Path) -> None:
    (podinfo / "guaranteed-until").write_text(iso(100))
    st = monitor(podinfo).status(lead_seconds=300)
    assert st.reasons == {StopReason.GUARANTEE_ENDING}
    assert st.expected and st.exit_code is None and not st.guarantee_expired


def test_guaranteed_until_past_means_preemptible_not_stop(podinfo: Path) -> None:
    (podinfo / "guaranteed-until").write_text(iso(-100))
    st = monitor(podinfo).status(lead_seconds=300)
    assert not st.expected and st.guarantee_expired


def test_deadline_within_lead(tmp_path: Path) -> None:
    m = StopMonitor(tmp_path, deadline=NOW + 30, clock=lambda: NOW, environ={})
    assert not m.stop_expected(10)
    st = m.status(45)
    assert st.reasons == {StopReason.DEADLINE} and st.exit_code is ExitCode.STOPPED
    # a deadline already passed is imminent, not stale
    assert StopMonitor(tmp_path, deadline=NOW - 5, clock=lambda: NOW, environ={}).stop_expected(0)


def test_deadline_and_podinfo_from_environment(podinfo: Path) -> None:
    (podinfo / "termination-warning-at").write_text(iso(10))
    env = {"CHAIN_DEADLINE": f"{NOW + 20:.3f}", "CHAIN_PODINFO": str(podinfo)}
    m = StopMonitor(environ=env, clock=lambda: NOW)
    assert m.podinfo == podinfo and m.deadline == NOW + 20
    st = m.status(30)
    assert st.reasons == {StopReason.DEADLINE, StopReason.TERMINATION_WARNING}
    assert st.exit_code is ExitCode.STOPPED  # the runner's stop wins over 75
    bad = StopMonitor(environ={"CHAIN_DEADLINE": "tomorrow"}, clock=lambda: NOW)
    assert bad.deadline is None


def test_signal_only_sets_a_flag_and_restores_handlers(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with monitor(tmp_path) as m:
        assert m.signal_received is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert m.signal_received == signal.SIGTERM
        st = m.status(0)
        assert st.reasons == {StopReason.SIGNAL} and st.exit_code is ExitCode.STOPPED
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigint_is_caught_too(tmp_path: Path) -> None:
    with monitor(tmp_path, environ={"CHAIN_STOP_SIGNAL": "INT"}) as m:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt
        assert m.signal_received == signal.SIGINT


def test_urgent_save_debounce_rearms_when_warning_clears(podinfo: Path) -> None:
    m = monitor(podinfo)
    warn = podinfo / "termination-warning-at"
    seen = []
    for value in [iso(60), iso(60), iso(60), "", "", iso(50), iso(50), "", iso(40)]:
        warn.write_text(value)
        seen.append(m.urgent_save_due(m.status(300)))
    # once per episode, again after the warning clears and returns
    assert seen == [True, False, False, False, False, True, False, False, True]


def test_parse_instant() -> None:
    assert parse_instant("2026-08-21T17:30:16Z") == datetime(2026, 8, 21, 17, 30, 16, tzinfo=timezone.utc)
    assert parse_instant("1800000000") == datetime.fromtimestamp(NOW, tz=timezone.utc)
    assert parse_instant("") is None and parse_instant(None) is None and parse_instant("x") is None
