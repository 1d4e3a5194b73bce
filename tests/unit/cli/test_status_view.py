"""The people's views (``chain.cli.status_view``) never send a control
character that came from disk or an app to the terminal: a reason written
into state.json or runners.jsonl with an escape sequence (OSC 52 sets the
user's clipboard) is shown spelled out, in plain text and through rich."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from _chains import make_chain
from rich.console import Console
from typer.testing import CliRunner

from chain.cli import status_view
from chain.cli.commands import app
from chain.core.decision import Verdict
from chain.core.model import ChainState
from chain.store import ChainDir, JudgedRunner

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


# --- the work redone (numbers that add up) ------------------------------------------------


def _killed_between_saves(chain: ChainDir, seq: int, before: int, after: int, reached: int) -> None:
    """A judged runner whose app the stop signal killed (no handler) ``reached - after + 1``
    iterations past its last save (nanoGPT's 0-based "iter N" printed after computing N)."""
    start = 1000.0 * seq
    chain.append_runner(
        JudgedRunner(
            job_id=str(40 + seq),
            seq=seq,
            exit_code=99,
            app_exit_code=143,
            iter_before=before,
            iter_after=after,
            iter_first=before,
            iter_reached=reached,
            verdict=Verdict.CONTINUE,
            reason="app killed",
            start=start,
            end=start + 60.0,
            stop_sent=start + 55.0,
        )
    )


@pytest.mark.parametrize("runners", [2, 201])
def test_status_says_what_the_runners_redid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runners: int) -> None:
    chain = ChainDir(make_chain(tmp_path, 0, ChainState.RUNNING, first=0, max_iter=100000))
    for seq in range(1, runners):  # each lost 3 of the 13 it computed (55 s), redone by the next
        _killed_between_saves(chain, seq, 10 * (seq - 1), 10 * seq, 10 * seq + 2)
    _killed_between_saves(chain, runners, 10 * (runners - 1), 10 * runners, 10 * runners - 1)  # lost none
    monkeypatch.chdir(tmp_path)
    shown = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    data = json.loads(CliRunner().invoke(app, ["status", "--json"]).stdout)["metrics"]
    if runners == 2:
        assert "  redone 3 iterations (12.7s)\n" in shown.stdout
        assert (data["redone_iterations"], data["redone_s"]) == (3, 12.692)
    else:  # over the runners the metrics read, and said so
        assert "  redone 597 iterations (42m06s) in the last 200 runners\n" in shown.stdout
        assert (data["redone_iterations"], data["redone_s"]) == (597, pytest.approx(199 * 55.0 * 3 / 13, abs=1e-2))


def test_status_says_nothing_of_redone_work_when_none_was_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_chain(tmp_path, 3, ChainState.RUNNING)  # each app saved and exited 99 by itself: nothing lost
    monkeypatch.chdir(tmp_path)
    shown = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"}).stdout
    assert "efficiency" in shown and "redone" not in shown
    data = json.loads(CliRunner().invoke(app, ["status", "--json"]).stdout)["metrics"]
    assert (data["redone_iterations"], data["redone_s"]) == (0, 0.0)
