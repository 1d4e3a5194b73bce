"""Values read from outside, within bounds: integers by their digits, JSON
documents by their depth and their numbers.

Python refuses to convert an integer of more than 4300 digits (a
``ValueError`` that is no one's message), and its JSON reader recurses once
per level of nesting (a ``RecursionError`` a few hundred levels down, or a
crash of a deeper caller). Whatever chain reads (a flag, an environment
variable, the counter file, its own state) goes through here instead: too
many digits, too deep, a number JSON cannot hold (``1e400``, ``NaN``) is a
:class:`BoundError`, a ``ValueError`` whose message says which, for the caller
to word as bad input or a corrupt file. Standard library only.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_DIGITS", "MAX_NUMBER", "BoundError", "check_depth", "loads_json", "parse_int", "shown"]

MAX_DIGITS = 18
"""Digits an integer chain reads may have: past any counter, second count,
job id or sequence number it meets, and far below Python's 4300."""

MAX_NUMBER = 10**15
"""The largest magnitude a number chain keeps may have (a counter, a count of
seconds, an epoch time): every sum of them is still an exact float."""

MAX_DEPTH = 32
"""Nesting a JSON document chain reads may have (its own are at most 3 deep)."""

_INTEGER = re.compile(r"[+-]?[0-9]+")


class BoundError(ValueError):
    """A value past what chain reads (the message says what and the bound)."""


def shown(text: str, width: int = 40) -> str:
    """``text`` for a one-line message: itself when short, else its start and
    its length (a 5000-digit value is not repeated back in full)."""
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def parse_int(text: str, *, max_digits: int = MAX_DIGITS) -> int:
    """The integer ``text`` spells (an optional sign, decimal digits, blanks
    around). ``ValueError`` when it spells none, :class:`BoundError` when it
    has more than ``max_digits`` digits: never Python's conversion limit."""
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        raise ValueError(f"not an integer: {shown(stripped)!r}")
    significant = stripped.lstrip("+-").lstrip("0") or "0"  # leading zeros count towards Python's limit too
    if len(significant) > max_digits:
        raise BoundError(f"a number of {len(significant)} digits")
    return -int(significant) if stripped.startswith("-") else int(significant)


def _json_int(text: str) -> int:
    return parse_int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BoundError(f"a number out of range ({shown(text)})")
    return value


def _json_constant(name: str) -> Any:
    raise BoundError(f"{name}, not a number")


def loads_json(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for what chain reads: integers of at most
    ``MAX_DIGITS`` digits, finite numbers only, nesting at most ``max_depth``
    deep. Raises ``json.JSONDecodeError`` for bad syntax, :class:`BoundError`
    for a value past a bound (both ``ValueError``)."""
    try:
        data = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant)
    except RecursionError:  # nested deeper than the interpreter's stack: refused, not crashed on
        raise BoundError(f"nested more than {max_depth} deep") from None
    check_depth(data, max_depth)
    return data


def check_depth(data: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`BoundError` when ``data`` (parsed JSON or TOML: lists and
    dicts) nests deeper than ``max_depth``; iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth >= max_depth:
            raise BoundError(f"nested more than {max_depth} deep")
        stack.extend((child, depth + 1) for child in children)
