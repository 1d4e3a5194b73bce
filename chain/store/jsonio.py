"""Files of the chain directory: atomic JSON, strict reads, a file's tail,
the app's counter. Nothing read is sourced or evaluated."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from chain.core.model import counter_error
from chain.errors import ChainDirError, CheckpointError
from chain.primitives import atomic


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file
    (``chain.primitives.atomic``'s write: temporary, fsync, rename, directory fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(path, data)


def read_json(path: Path, what: str) -> Any:
    if path.exists() and not path.is_file():  # a FIFO would hang the read
        raise ChainDirError(f"{what} {path} is not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ChainDirError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ChainDirError(f"{what} {path} is corrupt: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise ChainDirError(f"{what} {path} is corrupt: the file is empty") from None
        raise ChainDirError(
            f"{what} {path} is corrupt: not valid JSON (line {exc.lineno}: {exc.msg[:1].lower()}{exc.msg[1:]})"
        ) from None


def tail_lines(path: Path, count: int, *, max_bytes: int = 16384) -> list[str]:
    """The last ``count`` lines of a text file, reading backwards from its end
    no more than needed and at most ``max_bytes`` (a runner's output can be
    large, ``runners.jsonl`` long); [] if unreadable. A line cut at the
    ``max_bytes`` limit is dropped."""
    if count <= 0:
        return []
    try:
        with path.open("rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            pos, data = end, b""
            while pos > 0 and data.count(b"\n") <= count and end - pos < max_bytes:
                step = min(4096, pos, max_bytes - (end - pos))
                pos -= step
                fh.seek(pos)
                data = fh.read(step) + data
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if pos > 0 and lines:
        lines = lines[1:]  # the first one may be cut
    return lines[-count:]


def read_counter(path: Path) -> int:
    """The checkpoint counter: missing file -> 0, anything but an integer -> error."""
    try:
        value = atomic.read_counter(path)
    except atomic.CounterFormatError as exc:
        raise counter_error(path, exc) from None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint counter {path}: {exc.strerror}") from None
    return 0 if value is None else value
