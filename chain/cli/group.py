"""The ``chain`` app's one error handler.

Every ChainError becomes one line on stderr and its class's exit code
(``chain.errors``); click's usage errors become one line and exit 2; a
closed stdout ends the command quietly with 0; anything else is a bug: one
line and 70 (``CHAIN_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
import typer.core

try:  # typer >= 0.26 vendors its own click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer uses click itself
    import click  # type: ignore[no-redef]
# click >= 8.2 signals "no arguments, help shown" with this usage error.
_NO_ARGS_HELP: type[Exception] | None = getattr(click.exceptions, "NoArgsIsHelpError", None)

from chain.errors import ChainError, bug_line, error_line
from chain.primitives.codes import CliExit
from chain.primitives.interrupt import interrupted


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
            typer.echo(error_line(exc), err=True)
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
            typer.echo(bug_line(exc), err=True)
            sys.exit(CliExit.BUG)
        sys.exit(result if isinstance(result, int) else 0)
