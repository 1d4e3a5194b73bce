"""The ``chain`` command line: ``commands`` (the typer app, one error
handler), ``options`` (settings options generated from the settings table),
``status_view`` (``chain status`` for people)."""

from chain.cli.commands import app, main

__all__ = ["app", "main"]
