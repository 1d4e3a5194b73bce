"""Tables at any width: a cell is whole, wrapped at spaces
or cut with an ellipsis, never split inside a word; narrow terminals drop
the least useful columns first. Checked by parsing what ``chain status``
and ``chain list`` print, plain (off a terminal) and through rich."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from _chains import make_chain
from rich.console import Console
from typer.testing import CliRunner

from chain import api
from chain.api.listing import ChainRow
from chain.cli import status_view
from chain.cli.commands import app
from chain.cli.table_layout import Column, fit, plain_table, shorten_path, wrap_words
from chain.core.model import ChainState

WIDTHS = (40, 60, 80, 120)
BOX = "┏┳┓┃┡╇┩│└┴┘━─╸╺┌┬┐├┼┤"
LONG_REASON = (
    "app checkpointed (99) without checkpoint advance (0->0): does-the-app-resume-from-its-own-checkpoint?"
    " see its output"
)


def _tokens(text: str) -> list[str]:
    return text.translate({ord(c): " " for c in BOX}).split()


def _cut_ok(token: str, whole: set[str]) -> bool:
    """A token is a whole word of the wide rendering, or one cut with an ellipsis."""
    if token in whole:
        return True
    if token.endswith("…") and any(w.startswith(token[:-1]) for w in whole):
        return True
    return token.startswith("…") and any(w.endswith(token[1:]) for w in whole)


def _assert_no_split_words(shown: str, wide: str, width: int, table_lines: list[str]) -> None:
    whole = set(_tokens(wide))
    bad = [t for t in _tokens(shown) if not _cut_ok(t, whole)]
    assert not bad, (width, bad, shown)
    too_long = [line for line in table_lines if len(line) > width]
    assert not too_long, (width, too_long)


def _status_table_lines(shown: str) -> list[str]:
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("runners (last"))
    end = next(
        i for i in range(start, len(lines)) if lines[i].startswith("log:") or re.match(r"runner (\d+ )?\(job", lines[i])
    )
    return lines[start + 1 : end]


def _rich(width: int, print_it: Callable[[Console], None]) -> str:
    buffer = io.StringIO()
    print_it(Console(file=buffer, width=width, highlight=False))
    return buffer.getvalue()


@pytest.fixture
def long_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    chain_dir: Path = make_chain(tmp_path, 12, ChainState.RUNNING, reason=LONG_REASON, job_base=1_000_000)
    return chain_dir


@pytest.mark.parametrize("width", WIDTHS)
def test_status_plain_at_any_width(long_chain: Path, width: int) -> None:
    wide = CliRunner().invoke(app, ["status"], env={"COLUMNS": "1000"}).stdout
    shown = CliRunner().invoke(app, ["status"], env={"COLUMNS": str(width)}).stdout
    _assert_no_split_words(shown, wide, width, _status_table_lines(shown))
    for counter in ("99110->99120", "99020->99030"):  # the number and the counter are never cut
        assert counter in _tokens(shown), (width, shown)
    assert {"11", "12"} <= set(_tokens(shown))


@pytest.mark.parametrize("width", WIDTHS)
def test_status_rich_at_any_width(long_chain: Path, width: int) -> None:
    report = api.status_report(long_chain, history=10)
    wide = _rich(1000, lambda c: status_view.print_status(report, console=c))
    shown = _rich(width, lambda c: status_view.print_status(report, console=c))
    boxed = [line for line in shown.splitlines() if line[:1] in BOX]
    _assert_no_split_words(shown, wide, width, boxed)
    assert "99110->99120" in _tokens(shown) and "12" in _tokens(shown)


def test_narrow_status_drops_columns_not_words(long_chain: Path) -> None:
    narrow = CliRunner().invoke(app, ["status"], env={"COLUMNS": "40"}).stdout
    header = _status_table_lines(narrow)[0].split()
    assert header[:2] == ["#", "counter"] and "start" not in header and "job" not in header
    wide = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"}).stdout
    assert _status_table_lines(wide)[0].split()[:8] == [
        "#",
        "job",
        "state",
        "exit",
        "counter",
        "start",
        "wall",
        "verdict",
    ]


def _rows(base: Path) -> list[ChainRow]:
    return [
        ChainRow(
            str(base / "projects" / "sweep-learning-rate" / f"lr-{i}e-4" / ".chain"),
            f"chain-{i:06d}",
            "submitter",
            state,
            990 * i,
            100000,
            32409.2 if state == "running" else None,
            3600.0 * i if state == "running" else None,
            "reached MAX_ITER=100000" if state == "completed" else LONG_REASON,
        )
        for i, state in enumerate(("running", "completed", "failed", "stopped"), start=1)
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_chain_list_at_any_width(tmp_path: Path, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(tmp_path)
    wide = _rich(1000, lambda c: status_view.print_chain_list(rows, console=c))
    shown = _rich(width, lambda c: status_view.print_chain_list(rows, console=c))
    _assert_no_split_words(shown, wide, width, [line for line in shown.splitlines() if line[:1] in BOX])
    assert {"completed", "running", "directory"} <= set(_tokens(shown))
    # plain: the same table as `chain list` prints it into a pipe
    monkeypatch.setenv("COLUMNS", str(width))
    plain = io.StringIO()
    monkeypatch.setattr("sys.stdout", plain)
    status_view.print_chain_list(rows)
    _assert_no_split_words(plain.getvalue(), wide, width, plain.getvalue().splitlines())
    assert "completed" in _tokens(plain.getvalue()) and "1980/100000" in _tokens(plain.getvalue())


def test_chain_list_command_at_80_columns(tmp_path: Path) -> None:
    """What the issue saw: `directo|ry`, `complete|d`."""
    for name, state in (("lr-1e-4", ChainState.COMPLETED), ("lr-3e-4", ChainState.RUNNING)):
        (tmp_path / "sweep" / name).mkdir(parents=True)
        make_chain(tmp_path / "sweep" / name, 2, state)
    shown = CliRunner().invoke(app, ["list", str(tmp_path)], env={"COLUMNS": "80"}).stdout
    tokens = _tokens(shown)
    assert "directory" in tokens and "completed" in tokens and "running" in tokens, shown
    assert all(len(line) <= 80 for line in shown.splitlines())
    assert any(t.endswith("lr-1e-4/.chain") for t in tokens), shown


# --- the layout itself -------------------------------------------------------------


def test_wrap_words_breaks_at_spaces_and_cuts_long_words() -> None:
    assert wrap_words("continue: checkpoint advanced", 12) == ["continue:", "checkpoint", "advanced"]
    assert wrap_words("a verylongwordindeed b", 8) == ["a", "verylon…", "b"]
    assert wrap_words("", 5) == [""]
    assert all(len(line) <= 7 for line in wrap_words(LONG_REASON, 7))


def test_shorten_path_keeps_the_tail_at_a_slash() -> None:
    path = "/home/user/projects/sweep/lr-1e-4/.chain"
    assert shorten_path(path, 100) == path
    assert shorten_path(path, 20) == "…/lr-1e-4/.chain"
    assert shorten_path(path, 5) == ".cha…"


def test_fit_drops_the_least_kept_column_first() -> None:
    cols = [
        Column("#", ["12"]),
        Column("start", ["12:00:00"], keep=0),
        Column("job", ["123456"], keep=3),
        Column("reason", ["a b c d e f g h i j k l m n o p"], kind="text", min_width=10),
    ]
    assert [c.header for c, _ in fit(cols, 200, per_column=2, edges=-2)] == ["#", "start", "job", "reason"]
    assert [c.header for c, _ in fit(cols, 30, per_column=2, edges=-2)] == ["#", "job", "reason"]
    assert [c.header for c, _ in fit(cols, 16, per_column=2, edges=-2)] == ["#", "reason"]
    laid = fit(cols, 30, per_column=2, edges=-2)
    assert sum(w for _, w in laid) + 2 * (len(laid) - 1) <= 30


def test_plain_table_is_aligned() -> None:
    lines = plain_table("t", [Column("a", ["1", "22"]), Column("b", ["x y", "z"], kind="text")], 20)
    assert lines == ["t", "a   b", "1   x y", "22  z"]
