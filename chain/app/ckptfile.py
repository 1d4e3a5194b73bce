"""The single-file checkpoint format: a magic line, a JSON header line, the payload.

The header records the step, metric, wall time, the run's ``meta`` (its
configuration), the serializer name, and the payload's length and SHA-256,
so a checkpoint can be identified without decoding it and a damaged one is
detected on load rather than resumed from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["MAGIC", "CorruptCheckpoint", "encode", "parse_header", "read_header", "split"]

MAGIC = b"CHAINCKPT1\n"
_MAX_HEADER = 1 << 20  # the header holds the run's config; a MiB is plenty
_MAGIC = MAGIC


class CorruptCheckpoint(ValueError):
    """A published checkpoint whose content does not match its own header."""


def encode(header: dict[str, Any], payload: bytes) -> bytes:
    """The bytes of a checkpoint file."""
    return MAGIC + json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + payload


def read_header(path: Path) -> dict[str, Any]:
    """The header of a checkpoint file, reading only its first lines."""
    with open(path, "rb") as fh:
        magic = fh.read(len(_MAGIC))
        line = fh.readline(_MAX_HEADER)
    if magic != _MAGIC:
        raise CorruptCheckpoint(f"{path.name}: not a chain checkpoint (bad magic)")
    return parse_header(line, path)


def parse_header(line: bytes, path: Path) -> dict[str, Any]:
    """Parse the JSON header line (with its newline)."""
    if not line.endswith(b"\n"):
        raise CorruptCheckpoint(f"{path.name}: truncated header")
    try:
        header = json.loads(line)
    except ValueError as exc:
        raise CorruptCheckpoint(f"{path.name}: bad header: {exc}") from exc
    if not isinstance(header, dict):
        raise CorruptCheckpoint(f"{path.name}: header is not an object")
    return header


def split(data: bytes, path: Path) -> tuple[dict[str, Any], bytes]:
    """Header and payload of a whole checkpoint file."""
    if not data.startswith(_MAGIC):
        raise CorruptCheckpoint(f"{path.name}: not a chain checkpoint (bad magic)")
    nl = data.find(b"\n", len(_MAGIC))
    if nl < 0:
        raise CorruptCheckpoint(f"{path.name}: truncated header")
    header = parse_header(data[len(_MAGIC) : nl + 1], path)
    return header, data[nl + 1 :]
