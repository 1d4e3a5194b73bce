"""Table layout for the text views, shared by the rich and the plain renderer.

At any width a cell is shown whole, wrapped at spaces, or cut with an
ellipsis; never split inside a word. When the table does not fit, its
least useful columns are dropped first. Pure: no rich, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALWAYS = 9  # a column with this ``keep`` is never dropped
ELLIPSIS = "…"


@dataclass(frozen=True)
class Column:
    """One column: its header, its cells, how a cell may shrink, and how
    long it is kept when space runs out (lowest ``keep`` dropped first)."""

    header: str
    cells: list[str] = field(default_factory=list)
    kind: str = "fixed"  # "fixed": one line, "text": wraps at spaces, "path": cut on the left at a "/"
    keep: int = ALWAYS
    min_width: int = 16  # "text" and "path": what they keep before a column is dropped

    @property
    def natural(self) -> int:
        return max([len(self.header), *map(len, self.cells)])

    @property
    def least(self) -> int:
        if self.kind == "fixed":
            return self.natural
        longest_header_word = max(map(len, self.header.split()), default=1)
        return max(longest_header_word, min(self.natural, self.min_width))


def fit(columns: list[Column], width: int, *, per_column: int, edges: int) -> list[tuple[Column, int]]:
    """The columns kept at ``width`` and the width of each, in order.

    ``per_column``: what a column takes besides its text (padding, a rule);
    ``edges``: what the table takes once (its outer rules)."""
    kept = list(range(len(columns)))

    def need() -> int:
        return edges + per_column * len(kept) + sum(columns[i].least for i in kept)

    while need() > width:
        droppable = [i for i in kept if columns[i].keep < ALWAYS]
        if not droppable:
            break
        kept.remove(min(droppable, key=lambda i: (columns[i].keep, -i)))
    widths = {i: columns[i].least for i in kept}
    spare = width - need()
    for i in kept:  # room left: the shrinkable columns grow back, in order
        grow = max(0, min(spare, columns[i].natural - widths[i]))
        widths[i] += grow
        spare -= grow
    _shrink(columns, widths, -spare)
    return [(columns[i], widths[i]) for i in kept]


def _shrink(columns: list[Column], widths: dict[int, int], excess: int) -> None:
    """Too narrow even with only the kept columns: the shrinkable ones give
    way first, then the widest (their cells get cut with an ellipsis)."""
    flexible = [i for i in widths if columns[i].kind != "fixed"]
    while excess > 0:
        pool = [i for i in flexible if widths[i] > 1] or [i for i in widths if widths[i] > 1]
        if not pool:
            return
        widest = max(pool, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1


def cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters: whole, or cut with an ellipsis."""
    return text if len(text) <= width else text[: max(0, width - 1)] + ELLIPSIS


def shorten_path(text: str, width: int) -> str:
    """A path in ``width`` characters: whole, or its tail after ``…``
    starting at a ``/`` (the end of a path tells chains apart)."""
    if len(text) <= width:
        return text
    parts = text.split("/")
    for start in range(1, len(parts)):
        tail = ELLIPSIS + "/" + "/".join(parts[start:])
        if len(tail) <= width:
            return tail
    return cut(parts[-1], width)


def wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken at spaces; a word
    longer than a line is cut with an ellipsis."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) <= width:
            line += " " + word
            continue
        if line:
            lines.append(line)
        line = cut(word, width)
    return [*lines, line] if line or not lines else lines


def cell_lines(column: Column, text: str, width: int) -> list[str]:
    """A cell as the plain renderer prints it (the rich one does the same:
    fixed cells cut, text cells wrapped at spaces)."""
    if column.kind == "text":
        return wrap_words(text, width)
    if column.kind == "path":
        return [shorten_path(text, width)]
    return [cut(text, width)]


def plain_table(title: str, columns: list[Column], width: int) -> list[str]:
    """The table as text lines: a title, a header, a line per row (more
    where a text cell wraps), columns two spaces apart."""
    laid = fit(columns, width, per_column=2, edges=-2)
    lines = [cut(title, width)]
    header = [wrap_words(col.header, w) for col, w in laid]
    rows = [header] + [
        [cell_lines(col, col.cells[r], w) for col, w in laid] for r in range(len(columns[0].cells) if columns else 0)
    ]
    for cells in rows:
        for k in range(max(map(len, cells), default=1)):
            parts = [(cell[k] if k < len(cell) else "").ljust(w) for cell, (_, w) in zip(cells, laid)]
            lines.append("  ".join(parts).rstrip())
    return lines
