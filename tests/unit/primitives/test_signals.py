"""chain.primitives.signals: the one parser of signal names."""

from __future__ import annotations

import signal

import pytest

from chain.core.settings import Settings
from chain.primitives.signals import signal_name, signal_named, spelled


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TERM", signal.SIGTERM),
        (" sigint ", signal.SIGINT),
        ("SIGUSR1", signal.SIGUSR1),
        ("usr2", signal.SIGUSR2),
        ("", None),
        ("BOGUS", None),
        ("SIG", None),
        ("15", None),  # a number is not a name
    ],
)
def test_names_as_users_write_them(text: str, expected: signal.Signals | None) -> None:
    assert signal_named(text) is expected


def test_numbers_only_where_asked_as_scancel_takes_them() -> None:
    assert signal_named("15", numbers=True) is signal.SIGTERM
    assert signal_named("999", numbers=True) is None


def test_the_name_chain_and_slurm_write() -> None:
    assert signal_name(signal.SIGTERM) == "TERM" and signal_name(signal.SIGUSR1) == "USR1"
    assert spelled(" sigterm") == "TERM" and spelled("bogus") == "BOGUS"
    assert Settings(stop_signal="INT").stop_signum is signal.SIGINT
