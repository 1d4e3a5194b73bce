"""``--counter-cmd``: where a chain reads its counter when the app keeps it in
its own checkpoint, and ``--progress-pattern``: how far the app got, from
its output. Pure: parsing and matching only (the reading is
``chain.store.counter``).

A counter spec is a built-in reader or a shell command::

    json:PATH:KEY.PATH   a key path of a JSON file (dots; integer parts index lists)
    glob:PATTERN         the largest trailing integer of the names matching PATTERN
                         that are complete checkpoints (``chain.core.verify``)
                         (``glob:out/checkpoint-*`` -> 500 for ``checkpoint-500``)
    torch:PATH:KEY       a key of a ``torch.save`` dict (loaded in a subprocess)
    anything else        a shell command printing one integer; exit status 100
                         (``chain.primitives.codes.NO_CHECKPOINT_EXIT``): no checkpoint yet
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class CounterKind(str, enum.Enum):
    """Where the counter is read from."""

    FILE = "file"  # CKPT_PATH, the contract's plain-integer counter file (no --counter-cmd)
    JSON = "json"
    GLOB = "glob"
    TORCH = "torch"
    CMD = "cmd"


@dataclass(frozen=True)
class CounterSpec:
    """A parsed ``--counter-cmd``. ``path``: the file (json, torch) or the
    glob pattern; ``key``: the key path's parts (json) or the one key
    (torch); ``command``: the shell command (cmd)."""

    kind: CounterKind
    path: str = ""
    key: tuple[str, ...] = ()
    command: str = ""
    text: str = ""  # as the user wrote it, for messages

    @property
    def runs_code(self) -> bool:
        """Reading it runs a program (a shell command, or a Python with torch):
        never more than once a call on a login node (``chain status``)."""
        return self.kind in (CounterKind.CMD, CounterKind.TORCH)


class SpecError(ValueError):
    """A ``--counter-cmd`` or ``--progress-pattern`` that cannot be used (the message says why)."""


def _path_and_key(kind: str, rest: str) -> tuple[str, str]:
    path, sep, key = rest.rpartition(":")
    if not sep or not path.strip() or not key.strip():
        raise SpecError(f"{kind}: needs a file and a key, as {kind}:PATH:KEY")
    return path.strip(), key.strip()


def parse_counter_spec(text: str) -> CounterSpec:
    """The spec of ``text`` (empty: the contract's CKPT_PATH file). Raises
    ``SpecError`` for a built-in reader spelled without its parts."""
    given = text.strip()
    if not given:
        return CounterSpec(CounterKind.FILE)
    prefix, sep, rest = given.partition(":")
    if sep and prefix == "json":
        path, key = _path_and_key("json", rest)
        parts = tuple(part.strip() for part in key.split("."))
        if any(not part for part in parts):
            raise SpecError(f"json: key path {key!r} has an empty part (write KEY.KEY, e.g. state.step)")
        return CounterSpec(CounterKind.JSON, path=path, key=parts, text=given)
    if sep and prefix == "torch":
        path, key = _path_and_key("torch", rest)
        return CounterSpec(CounterKind.TORCH, path=path, key=(key,), text=given)
    if sep and prefix == "glob":
        if not rest.strip():
            raise SpecError("glob: needs a pattern, as glob:out/checkpoint-*")
        return CounterSpec(CounterKind.GLOB, path=rest.strip(), text=given)
    return CounterSpec(CounterKind.CMD, command=given, text=given)


_TRAILING_INT = re.compile(r"([0-9]+)$")


def trailing_integer(name: str) -> int | None:
    """The integer a name ends with (``checkpoint-500`` -> 500; an extension
    is not part of it: ``ckpt-3.pt`` -> 3); None when there is none."""
    stem = name.rstrip("/")
    stem = stem.rsplit("/", 1)[-1]
    if "." in stem and not _TRAILING_INT.search(stem):
        stem = stem.split(".", 1)[0]
    match = _TRAILING_INT.search(stem)
    return int(match.group(1)) if match else None


def key_path_value(data: object, key: tuple[str, ...]) -> object:
    """The value at ``key`` in parsed JSON: a dict is indexed by the part, a
    list by the part as an integer. Raises ``KeyError`` naming the first
    part that is not there."""
    node = data
    for depth, part in enumerate(key):
        where = ".".join(key[: depth + 1])
        if isinstance(node, dict):
            if part not in node:
                raise KeyError(where)
            node = node[part]
        elif isinstance(node, list) and re.fullmatch(r"-?[0-9]{1,18}", part) and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(where)
    return node


def as_counter(value: object) -> int | None:
    """A counter from a JSON or torch value: a non-negative integer (a float
    with no fraction too, as JSON writers give ``500.0``); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def compile_progress_pattern(text: str) -> re.Pattern[str]:
    """``--progress-pattern``: a regular expression whose first group captures
    the iteration in one line of the app's output. Raises ``SpecError``."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise SpecError(f"not a valid regular expression: {exc}") from None
    if pattern.groups < 1:
        raise SpecError(r"has no group: put the iteration in parentheses, e.g. '^iter (\d+):'")
    return pattern


def _matched(line: str, pattern: re.Pattern[str]) -> int | None:
    match = pattern.search(line)
    if match is not None and match.group(1) is not None and re.fullmatch(r"[0-9]{1,18}", match.group(1).strip()):
        return int(match.group(1).strip())
    return None


def last_iteration(text: str, pattern: re.Pattern[str]) -> int | None:
    """The iteration of the last line of ``text`` that ``pattern`` matches
    (searched line by line, so ``^`` is a line's start) with an integer in
    its first group; None when no line does."""
    return next((n for line in reversed(text.splitlines()) if (n := _matched(line, pattern)) is not None), None)


def first_iteration(text: str, pattern: re.Pattern[str]) -> int | None:
    """As ``last_iteration``, for the first matching line of ``text``."""
    return next((n for line in text.splitlines() if (n := _matched(line, pattern)) is not None), None)
