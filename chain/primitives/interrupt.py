"""^C as chain's commands and jobs take it (no typer here: the jobs' own
entry, ``chain.jobs.entry.main``, uses it without the CLI)."""

from __future__ import annotations

import signal
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """^C as the ``chain`` command raises it: a KeyboardInterrupt of its own
    class. CPython (3.8 to 3.13 at least) marks a *bare* KeyboardInterrupt
    that leaves a string ``exec``/``eval`` as unhandled for good, even when a
    caller catches it; under ``python -m chain`` the interpreter then kills
    itself with SIGINT at exit instead of exiting with the code chain chose.
    dataclasses and namedtuple build their methods by string ``exec``, so a
    ^C landing while a module is imported was enough (a load-dependent -2
    for ``chain submit --wait``'s "stopped watching; 130"). CPython tests
    the exception's exact type, so a subclass never sets that mark; every
    ``except KeyboardInterrupt`` still catches it."""


def interrupted(exc: BaseException) -> bool:
    """``exc`` is a ^C, or an error a ^C caused: Python reports an exception
    raised inside a class's ``__set_name__`` (a dataclass built while a module
    is imported) as a RuntimeError from it, so a ^C landing there surfaces so."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__
    return False


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted


def interrupt_as_chain() -> None:
    """From here on, SIGINT raises :class:`Interrupted`. Only where Python's
    own ^C handler is in place: a SIGINT the command was started with
    ignored (a background job of a non-interactive shell) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupted)
