"""The ``chain`` app's one error handler.

Every ChainError becomes one line on stderr and its class's exit code
(``chain.errors``); click's usage errors become one line and exit 2; a
closed stdout ends the command quietly with 0; anything else is a bug: one
line and 70 (``CHAIN_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

import typer
import typer.core

try:  # typer >= 0.26 vendors its own click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer uses click itself
    import click  # type: ignore[no-redef]
# click >= 8.2 signals "no arguments, help shown" with this usage error.
_NO_ARGS_HELP: type[Exception] | None = getattr(click.exceptions, "NoArgsIsHelpError", None)

from chain.errors import ChainError
from chain.primitives.codes import CliExit


def _silence_stdout() -> None:
    """The reader of stdout went away (``chain status | head -n 1``): what is
    left to print goes nowhere. The command then ends quietly with 0, so a
    ``set -o pipefail`` script goes on (as after ``head`` of a file)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (CliRunner): nothing is flushed at exit
        return
    # Python flushes stdout at exit: into /dev/null, not into the closed pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


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


class ChainGroup(typer.core.TyperGroup):
    """Maps errors to one line and an exit code, for the console script and
    for CliRunner alike (both go through ``main``)."""

    # typer's main turns a closed stdout into exit 1 around these two (the
    # group's own help is printed while its context is made): end with 0
    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            _silence_stdout()
            raise typer.Exit(0) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _silence_stdout()
            raise typer.Exit(0) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
            sys.stdout.flush()  # here, where a closed pipe is handled, not at exit
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(0)
        except ChainError as exc:
            typer.echo(f"chain: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("chain: aborted", err=True)
            sys.exit(CliExit.INTERRUPTED)
        except click.exceptions.ClickException as exc:
            if _NO_ARGS_HELP is not None and isinstance(exc, _NO_ARGS_HELP):
                typer.echo(exc.format_message())
                sys.exit(0)
            typer.echo(f"chain: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(CliExit.INTERRUPTED)
        except Exception as exc:  # a bug: still one line, the traceback on request
            if interrupted(exc):
                sys.exit(CliExit.INTERRUPTED)
            if os.environ.get("CHAIN_DEBUG"):
                raise
            typer.echo(
                f"chain: internal error: {type(exc).__name__}: {exc} (CHAIN_DEBUG=1 shows the traceback)", err=True
            )
            sys.exit(CliExit.BUG)
        sys.exit(result if isinstance(result, int) else 0)
