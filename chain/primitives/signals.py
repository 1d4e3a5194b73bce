"""The one parser of signal names, for the app side and the chain alike."""

from __future__ import annotations

import signal

__all__ = ["signal_name", "signal_named", "spelled"]


def signal_named(name: str, *, numbers: bool = False) -> signal.Signals | None:
    """A signal from its name as users write it (``TERM``, ``sigint``,
    ``SIGUSR1``), or with ``numbers`` its number too (``15``, as scancel
    takes it); None when there is no such signal."""
    name = spelled(name)
    try:
        if name.isdigit():
            return signal.Signals(int(name)) if numbers else None
        return signal.Signals["SIG" + name]
    except (KeyError, ValueError):
        return None


def spelled(name: str) -> str:
    """A signal name as chain's settings and Slurm write it, whether or not
    there is such a signal: ``" sigterm"`` -> ``"TERM"``."""
    return name.strip().upper().removeprefix("SIG")


def signal_name(sig: int) -> str:
    """A signal's name as Slurm and chain's settings write it: ``TERM`` for
    SIGTERM; the number as text when it has no name."""
    try:
        return signal.Signals(sig).name.removeprefix("SIG")
    except ValueError:
        return str(int(sig))
