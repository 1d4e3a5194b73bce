"""The text views on a terminal: ``chain.cli.status_view``'s items through
rich (colours, boxed tables), laid out as the plain view lays them out."""

from __future__ import annotations

from rich.console import Console
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from chain.cli.status_view import Bar, Item, Line, TableItem, bar_label
from chain.cli.table_layout import fit, shorten_path


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1; chain's one handler ends a closed stdout with 0
        self.quiet = True
        raise BrokenPipeError


def render(items: list[Item], console: Console | None = None) -> None:
    """Print the items on ``console`` (default: stdout, markup and emoji off:
    no ``[x]`` or ``:name:`` in the chain's text is interpreted)."""
    out = console or _Console(highlight=False, markup=False, emoji=False)
    for item in items:
        if isinstance(item, Line):
            text = Text()
            for part, style in item.parts:
                text.append(part, style=style)
            # the app's output folded (all of it shown); chain's lines left to
            # the terminal to wrap, so a path stays whole for copy and paste
            if item.fold:
                out.print(text, overflow="fold")
            else:
                out.print(text, soft_wrap=True)
        elif isinstance(item, Bar):
            grid = Table.grid(padding=(0, 1))
            grid.add_row(
                ProgressBar(total=max(item.total, 1), completed=min(item.done, item.total), width=40), bar_label(item)
            )
            out.print(grid)
        else:
            out.print(_table(item, out.width))


def _table(item: TableItem, width: int) -> Table:
    """A boxed table: each column 2 of padding and a rule, plus one rule."""
    laid = fit(item.columns, width, per_column=3, edges=1)
    table = Table(title=item.title, title_justify="left")
    for column, w in laid:
        # text columns wrap at spaces; the rest stay on one line, cut with an ellipsis
        table.add_column(column.header, width=w, no_wrap=column.kind != "text", overflow="ellipsis")
    for r in range(len(item.columns[0].cells) if item.columns else 0):
        # Text cells: literal (no markup parse) and cheaper to measure than str
        table.add_row(
            *(
                Text(shorten_path(column.cells[r], w) if column.kind == "path" else column.cells[r])
                for column, w in laid
            )
        )
    return table
