"""The ``chain`` command line: ``commands`` (the typer app), ``group`` (its
one error handler), ``options`` (settings options generated from the
settings table), ``status_view`` (``chain status`` and ``chain list`` for
people: plain text off a terminal), ``rich_view`` (the same on a terminal),
``table_layout`` (their tables at any width)."""

from chain.cli.commands import app, main

__all__ = ["app", "main"]
