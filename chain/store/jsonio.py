"""Files of the chain directory by path: atomic JSON, strict reads, a file's
tail, the app's counter. The chain directory's files go through
``chain.store.guarded`` (the path's directory is the root: a link or a FIFO
at the name is refused, never followed or waited on). Nothing read is
sourced or evaluated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chain.core.model import counter_error
from chain.errors import CheckpointError
from chain.primitives import atomic, safeio
from chain.store.guarded import Guarded


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file
    (``chain.primitives.atomic``'s write: temporary, fsync, rename, directory
    fsync); what is at the name, a link say, is replaced, never followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Guarded(path.parent).write(path.name, atomic.json_bytes(data))


def read_json(path: Path, what: str) -> Any:
    """A JSON file of chain's, at most ``guarded.JSON_CAP`` bytes, within
    ``chain.primitives.bounded``'s bounds; a one-line ``ChainDirError`` for
    anything else. FileNotFoundError when it is missing."""
    return Guarded(path.parent).read_json(path.name, what)


def tail_lines(path: Path, count: int, *, max_bytes: int = 16384) -> list[str]:
    """The last ``count`` lines of a file of the chain directory (``Guarded.tail_lines``)."""
    return Guarded(path.parent).tail_lines(path.name, count, max_bytes=max_bytes)


def read_counter(path: Path) -> int:
    """The checkpoint counter: missing file -> 0, anything but an integer -> error."""
    try:
        value = atomic.read_counter(path)
    except atomic.CounterFormatError as exc:
        raise counter_error(path, exc) from None
    except safeio.UnsafeFileError as exc:
        raise CheckpointError(f"checkpoint counter {exc}") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint counter {path}: {exc.strerror}") from None
    return 0 if value is None else value
