"""The people's views (``chain.cli.status_view``) never send a control
character that came from disk or an app to the terminal: a reason written
into state.json or runners.jsonl with an escape sequence (OSC 52 sets the
user's clipboard) is shown spelled out, in plain text and through rich."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from _chains import make_chain
from rich.console import Console
from typer.testing import CliRunner

from chain.cli import status_view
from chain.cli.commands import app
from chain.core.model import ChainState
from chain.store import ChainDir

HOSTILE = "app said \x1b]52;c;ZXZpbA==\x07 then\u2028\x9b31m"


def test_printable_spells_control_characters_out() -> None:
    assert status_view.printable(HOSTILE) == "app said \\x1b]52;c;ZXZpbA==\\x07 then\\u2028\\x9b31m"
    assert status_view.printable("tab\tand ü stay") == "tab\tand ü stay"


@pytest.mark.parametrize("command", [["status"], ["list", "."]])
def test_a_hostile_reason_reaches_no_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    chain = ChainDir(make_chain(tmp_path, 2, ChainState.FAILED, reason=HOSTILE))
    status = chain.load_status()
    assert status is not None
    status.reason = HOSTILE  # the chain's own reason too (what chain list shows)
    chain.save_status(status)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "\\x1b]52" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x07\x9b\u2028")


def test_the_rich_view_gets_the_spelled_out_text(tmp_path: Path) -> None:
    from chain import api

    make_chain(tmp_path, 2, ChainState.FAILED, reason=HOSTILE)
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system=None, highlight=False, markup=False)
    status_view.print_status(api.status_report(tmp_path / ".chain", history=5), console=console)
    assert "\\x1b]52" in out.getvalue() and "\x1b]52" not in out.getvalue()
    assert "\x07" not in out.getvalue() and "\u2028" not in out.getvalue()
