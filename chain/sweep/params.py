"""A sweep's parameters and points. Pure: text and TOML values in, typed
points out, every bad value a one-line ``ConfigError``.

A value is a TOML scalar (integer, float, boolean, string); ``--param``'s
text is read as one the way TOML would spell it (``3e-4`` a float, ``2`` an
integer, ``true`` a boolean, anything else a string), so a point means the
same from a sweep file and from flags. Values are the user's text and may be
hostile: control characters (they would end the app command's line) are
refused, never carried into a command, a file name or a terminal.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chain.errors import ConfigError
from chain.primitives.bounded import MAX_DIGITS

Scalar = bool | int | float | str

MAX_POINTS = 10_000  # a sweep's points at most: a typo in a range must not queue a million chains
MAX_VALUE_CHARS = 1_000  # a value's text at most (names shorten longer ones; commands carry them whole)
MAX_NAME_CHARS = 64
MAX_PARAMS = 32
# what chain reads back (sweep.json, each point's settings) through primitives.bounded: a
# longer integer written there would leave a sweep chain itself calls damaged
MAX_INT_DIGITS = MAX_DIGITS
# a flag's run of digits up to this long reads as an integer, a longer one as a string: point
# names depend on it (sweep.naming), so it stays what it was when names were first made
INT_TEXT_DIGITS = 30

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]+|[0-9]+(\.[0-9]+)?[eE][+-]?[0-9]+)")
_RANGE = re.compile(r"([+-]?[0-9]+)\.\.([+-]?[0-9]+)")


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its parameters, by name (sorted, so a point is
    the same whatever order its file or flags gave them in)."""

    params: tuple[tuple[str, Scalar], ...]

    @classmethod
    def of(cls, values: Mapping[str, Scalar]) -> Point:
        return cls(tuple(sorted(values.items())))

    def as_dict(self) -> dict[str, Scalar]:
        return dict(self.params)

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.params)


def shown(text: str, width: int = 40) -> str:
    """``text`` for a one-line message: quoted, control characters escaped, cut."""
    return repr(text if len(text) <= width else text[:width] + "...")


def check_name(name: object, where: str) -> str:
    """A parameter's name: an identifier (it becomes ``{name}`` and ``CHAIN_PARAM_NAME``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        text = name if isinstance(name, str) else repr(name)
        raise ConfigError(
            f"{where}: parameter name {shown(text)} is not a name (letters, digits and _, "
            f"not starting with a digit, at most {MAX_NAME_CHARS} characters)"
        )
    return name


def _control(text: str) -> bool:
    return any(unicodedata.category(ch)[0] == "C" or ch in "\u2028\u2029" for ch in text)


def check_value(value: object, where: str) -> Scalar:
    """A value as TOML gave it: a scalar, finite, its text one bounded line."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{where}: {value} is not a finite number")
        return value
    if isinstance(value, (bool, int)):
        if isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > MAX_INT_DIGITS:
            raise ConfigError(f"{where}: an integer of more than {MAX_INT_DIGITS} digits")
        return value
    if not isinstance(value, str):
        kind = "a table" if isinstance(value, Mapping) else "a list" if isinstance(value, list) else "not a value"
        raise ConfigError(f"{where}: {kind}; a value is a number, a boolean or a string")
    if _control(value):
        raise ConfigError(f"{where}: the value {shown(value)} holds a control character")
    if len(value) > MAX_VALUE_CHARS:
        raise ConfigError(f"{where}: a value of {len(value)} characters (at most {MAX_VALUE_CHARS})")
    return value


def scalar_text(value: Scalar) -> str:
    """A value as the app command and the environment get it (TOML's spelling)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same float
    return str(value)


def parse_scalar(text: str) -> Scalar:
    """``--param``'s text as a TOML scalar; a string when it is not a number
    or boolean (a run of more than ``INT_TEXT_DIGITS`` digits too). An
    integer is checked by ``check_value`` like a sweep file's."""
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text) and len(text.lstrip("+-")) <= INT_TEXT_DIGITS:
        return int(text)
    if _FLOAT.fullmatch(text) and len(text) <= 40:
        return float(text)
    return text


def parse_param_flag(text: str) -> tuple[str, list[Scalar]]:
    """``NAME=V1,V2,...`` (``A..B``: the integers A to B, both included) as
    the name and its values, in order."""
    where = f"--param {shown(text)}"
    if _control(text):
        raise ConfigError(f"{where}: holds a control character")
    name, eq, rest = text.partition("=")
    if not eq:
        raise ConfigError(f"{where}: expected NAME=VALUES, e.g. lr=1e-3,3e-4 or seed=0..2")
    check_name(name.strip(), where)
    values: list[Scalar] = []
    for item in rest.split(","):
        item = item.strip()
        if not item:
            raise ConfigError(f"{where}: an empty value (values are separated by commas)")
        found = _RANGE.fullmatch(item)
        values.extend(_range(found, where) if found else [check_value(parse_scalar(item), where)])
    return name.strip(), values


def _range(found: re.Match[str], where: str) -> list[Scalar]:
    low_text, high_text = found.groups()
    if max(len(low_text.lstrip("+-")), len(high_text.lstrip("+-"))) > MAX_INT_DIGITS:
        raise ConfigError(f"{where}: a range bound of more than {MAX_INT_DIGITS} digits")
    low, high = int(low_text), int(high_text)
    if high < low:
        raise ConfigError(f"{where}: the range {low}..{high} is empty (write the smaller bound first)")
    if high - low + 1 > MAX_POINTS:
        raise ConfigError(f"{where}: the range {low}..{high} has more than {MAX_POINTS} values")
    return list(range(low, high + 1))


def grid_points(axes: Sequence[tuple[str, Sequence[Scalar]]], where: str) -> list[Point]:
    """Every combination of the axes' values, the first axis varying slowest."""
    if not axes:
        raise ConfigError(f"{where}: no parameters")
    for name, values in axes:
        if not values:
            raise ConfigError(f"{where}: parameter {name} has no values")
    count = math.prod(len(values) for _, values in axes)
    if count > MAX_POINTS:
        raise ConfigError(f"{where}: {count} points (at most {MAX_POINTS})")
    names = [name for name, _ in axes]
    return checked_points(
        [Point.of(dict(zip(names, combo))) for combo in itertools.product(*(v for _, v in axes))], where
    )


def grid_from_toml(table: Mapping[str, Any], where: str) -> list[Point]:
    """A ``[grid]`` table: each key a parameter, its value a list of values (or one value)."""
    axes: list[tuple[str, Sequence[Scalar]]] = []
    for key, raw in table.items():
        name = check_name(key, where)
        items = raw if isinstance(raw, list) else [raw]
        axes.append((name, [check_value(v, f"{where}: {name}") for v in items]))
    return grid_points(axes, where)


def points_from_toml(tables: object, where: str) -> list[Point]:
    """``[[point]]`` tables: each one point, its keys the parameters."""
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise ConfigError(f"{where}: write each point as a [[point]] table")
    if len(tables) > MAX_POINTS:
        raise ConfigError(f"{where}: {len(tables)} points (at most {MAX_POINTS})")
    points = []
    for n, table in enumerate(tables, start=1):
        if not table:
            raise ConfigError(f"{where} {n}: a point without parameters")
        values = {check_name(k, f"{where} {n}"): check_value(v, f"{where} {n}: {k}") for k, v in table.items()}
        points.append(Point.of(values))
    return checked_points(points, where)


def grid_from_flags(flags: Iterable[str]) -> list[Point]:
    """Points of ``--param`` flags (a grid; a name given twice is an error)."""
    axes: dict[str, list[Scalar]] = {}
    for text in flags:
        name, values = parse_param_flag(text)
        if name in axes:
            raise ConfigError(f"--param {name} given twice: give its values once, separated by commas")
        axes[name] = values
    return grid_points(list(axes.items()), "--param")


def checked_points(points: list[Point], where: str) -> list[Point]:
    """The points, if no two are the same and no parameter names clash in
    the environment (``lr`` and ``LR`` are both ``CHAIN_PARAM_LR``)."""
    if len(points) > MAX_POINTS:
        raise ConfigError(f"{where}: {len(points)} points (at most {MAX_POINTS})")
    seen: set[tuple[tuple[str, Any], ...]] = set()
    for point in points:
        if len(point.params) > MAX_PARAMS:
            raise ConfigError(f"{where}: a point with {len(point.params)} parameters (at most {MAX_PARAMS})")
        upper = [name.upper() for name in point.names()]
        if len(set(upper)) != len(upper):
            raise ConfigError(f"{where}: parameter names that differ only in case ({', '.join(point.names())})")
        key = identity(point)
        if key in seen:
            raise ConfigError(f"{where}: the point {point.as_dict()} is given twice")
        seen.add(key)
    return points


def identity(point: Point) -> tuple[tuple[str, Any], ...]:
    """What makes two points the same: names, values and their types (``1``,
    ``1.0``, ``true`` and ``"1"`` are four points)."""
    return tuple((name, (type(value).__name__, value)) for name, value in point.params)
