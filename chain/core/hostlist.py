"""Slurm host lists (``n[1-3,05],gpu-a1``) expanded, as ``scontrol show
hostnames`` does, without asking Slurm. Pure."""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def _expand_one(item: str) -> list[str]:
    match = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\](.*)", item)
    if not match:
        if "[" in item or "]" in item:
            raise ValueError(f"not a Slurm host list: {item!r}")
        return [item]
    prefix, ranges, rest = match.groups()
    tails = _expand_one(rest) if rest else [""]
    names = []
    for part in ranges.split(","):
        bounds = _RANGE.match(part.strip())
        if not bounds:
            raise ValueError(f"not a Slurm host list: {item!r}")
        low, high = bounds.group(1), bounds.group(2) or bounds.group(1)
        width = len(low) if low.startswith("0") else 0  # n[01-10]: zero-padded
        names += [f"{prefix}{n:0{width}d}{tail}" for n in range(int(low), int(high) + 1) for tail in tails]
    return names


def expand_hostlist(text: str) -> list[str]:
    """``n[1-3],gpu01`` -> ``['n1', 'n2', 'n3', 'gpu01']``; ValueError on a malformed list."""
    return [name for item in _split_top(text.strip()) for name in _expand_one(item)]
