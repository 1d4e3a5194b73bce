"""One JSON codec for the records the chain directory keeps.

``decode`` builds a dataclass from a JSON object and checks every field
against its type hint (``int``, ``float``, ``str``, ``bool``, enums,
``X | None``, ``list[...]``, ``tuple[str, ...]``, ``dict[str, X]``): a
record edited by hand or torn by a crash is refused with its path and field,
never half-used (``lenient``: a field that does not fit takes its default,
for logs whose old lines are read as far as they go). ``encode`` is the
inverse. Keys the reader does not know are ignored (a newer writer); missing
keys take the field's default. A field marked ``TRANSIENT`` (what a process
holds of a record and never stores) is neither written nor read. A number a record holds (a counter, a count
of seconds, an epoch time) is finite and at most ``bounded.MAX_NUMBER`` in
size: ``1e300`` as a runner's start is refused here, not overflowed on later.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, Union

from chain.primitives.bounded import MAX_NUMBER

T = TypeVar("T")


TRANSIENT = {"transient": True}  # ``field(metadata=TRANSIENT)``: kept in memory, never in the file


def _stored(f: dataclasses.Field[Any]) -> bool:
    return not f.metadata.get("transient", False)


class RecordError(ValueError):
    """A record does not have the shape its type says (message: which field)."""


def encode(record: Any, *, skip_none: bool = False) -> dict[str, Any]:
    """A dataclass as a JSON object (enums by value, tuples as lists);
    ``skip_none`` leaves out the fields not known yet."""
    out: dict[str, Any] = {}
    for f in filter(_stored, dataclasses.fields(record)):
        value = getattr(record, f.name)
        if value is None and skip_none:
            continue
        out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def decode(cls: type[T], data: Any, *, lenient: bool = False) -> T:
    """``cls`` from a JSON object, every field checked against its type
    (``lenient``: one that does not fit is left out, as if missing)."""
    if not isinstance(data, dict):
        raise RecordError("not a JSON object")
    shape = _shape(typing.cast(type, cls))  # a class is hashable; mypy cannot see it through type[T]
    values: dict[str, Any] = {}
    for name, hint, _ in shape:
        if name not in data:
            continue
        try:
            values[name] = _check(hint, data[name])
        except RecordError:
            if not lenient:
                raise RecordError(f"bad {name} {data[name]!r}") from None
    missing = [name for name, _, required in shape if required and name not in values]
    if missing:  # said here: the constructor's TypeError is Python's wording, not a person's
        raise RecordError(f"no {', '.join(missing)}")
    return cls(**values)


@functools.cache
def _shape(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """A record class's fields: (name, type hint, required), evaluated once
    per class: get_type_hints compiles every annotation string anew, which
    was 3/4 of reading 10 000 runner records (``chain status --json``)."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, hints[f.name], f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        for f in filter(_stored, dataclasses.fields(cls))
    )


@functools.cache
def _form(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """A hint's origin and arguments (``typing.get_origin``, ``get_args``), once per hint."""
    return typing.get_origin(hint), typing.get_args(hint)


def _check(hint: Any, value: Any) -> Any:
    origin, options = _form(hint)
    if origin in (Union, types.UnionType):
        return _union(options, value)
    if origin in (list, tuple):
        return _sequence(origin, options, value)
    if origin is dict:
        return _mapping(options, value)
    return _scalar(hint, value)


def _union(options: tuple[Any, ...], value: Any) -> Any:
    """``value`` as the first of ``options`` it fits (None only where one of them is None)."""
    if value is None and type(None) in options:
        return None
    for option in options:
        if option is type(None):
            continue
        try:
            return _check(option, value)
        except RecordError:
            continue
    raise RecordError(f"is {value!r}")


def _sequence(origin: Any, options: tuple[Any, ...], value: Any) -> Any:
    """A JSON list as ``list[X]`` or ``tuple[X, ...]``, each item checked."""
    if not isinstance(value, list):
        raise RecordError(f"is {value!r}, not a list")
    checked = [_check(options[0], v) for v in value]
    return tuple(checked) if origin is tuple else checked


def _mapping(options: tuple[Any, ...], value: Any) -> Any:
    """A JSON object as ``dict[str, X]``, each key and value checked (``dict[str, Any]``: as it is)."""
    if not isinstance(value, dict):
        raise RecordError(f"is {value!r}, not an object")
    if options and options[1] is not Any:
        return {_check(options[0], k): _check(options[1], v) for k, v in value.items()}
    return value


def _number(value: Any) -> bool:
    """A JSON number a record may hold: not a bool, finite, within ``MAX_NUMBER``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -MAX_NUMBER <= value <= MAX_NUMBER  # NaN compares False: refused too


_SCALARS: dict[Any, Callable[[Any], bool]] = {
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and _number(v),
    # NaN, infinities and 1e300 are not numbers a record can hold
    float: _number,
    str: lambda v: isinstance(v, str),
    Any: lambda v: True,
}


def _scalar(hint: Any, value: Any) -> Any:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise RecordError(f"is {value!r}") from None
    check = _SCALARS.get(hint)
    if check is None or not check(value):
        raise RecordError(f"is {value!r}")
    return float(value) if hint is float else value
