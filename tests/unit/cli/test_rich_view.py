"""The rich view of the terminal (``chain.cli.rich_view``): the status
view's items as rich prints them, the chain's text never read as markup,
and a closed stdout left to chain's one handler."""

from __future__ import annotations

import io

import pytest

from chain.cli.rich_view import _Console, render
from chain.cli.status_view import Bar, Line, TableItem
from chain.cli.table_layout import Column


def _printed(items: list[Line | Bar | TableItem], width: int = 60) -> str:
    out = io.StringIO()
    render(items, _Console(file=out, width=width, highlight=False, markup=False, emoji=False, color_system=None))
    return out.getvalue()


def test_the_rich_view_raises_a_broken_pipe_for_the_one_handler() -> None:
    """rich's own handler would exit 1 (what `chain status | head` did)."""

    class Closed(io.StringIO):
        def write(self, _: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        render([Line((("x", ""),))], _Console(file=Closed(), width=80))


def test_the_chains_text_is_printed_as_it_is_never_as_markup() -> None:
    shown = _printed([Line((("chain ", ""), ("[bold]x[/] :smile:", "bold")))])
    assert shown == "chain [bold]x[/] :smile:\n"


def test_a_bar_says_what_is_done_of_the_total() -> None:
    shown = _printed([Bar(done=30, total=40), Bar(done=5, total=0)])
    assert "30/40 (75%)" in shown and "5/0 (500%)" in shown  # an unknown total draws no division by zero


def test_a_table_keeps_its_rows_and_cuts_a_long_path_on_the_left() -> None:
    path = "/scratch/someone/sweeps/learning-rate/lr=0.1/.chain"
    table = TableItem(
        "runners",
        [Column("job", ["101", "102"]), Column("where", [path, "/tmp/b/.chain"], kind="path", min_width=10)],
    )
    shown = _printed([table], width=32)
    assert shown.splitlines()[0].strip() == "runners"
    assert "101" in shown and "102" in shown and "/tmp/b/.chain" in shown
    assert path not in shown and "│ …/lr=0.1/.chain " in shown  # its end tells chains apart
    assert max(len(line) for line in shown.splitlines()) <= 32
