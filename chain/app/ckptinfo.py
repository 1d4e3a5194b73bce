"""The records of a checkpoint store (``chain.app.store``): what one
checkpoint is, what a restore loaded, and the store's file names."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from chain.app.atomic import DONE_MARKER, TMP_PREFIX, fsync_dir, write_done_marker

log = logging.getLogger("chain.app.store")

NAME_RE = re.compile(r"ckpt-(\d{12})\.(ckpt|d)")

KEEP_ENV = "CHAIN_KEEP_CHECKPOINTS"
"""How many of the newest checkpoints the adapters keep (``--keep-checkpoints``; the runner sets it)."""
DEFAULT_KEEP = 2
_MAX_KEEP = 10**6


class MetricMode(Enum):
    """Which direction of the user metric is better."""

    MIN = "min"
    MAX = "max"


class CheckpointKind(Enum):
    """Single file (atomic rename) or sharded directory (DONE marker)."""

    FILE = "ckpt"
    DIR = "d"


@dataclass(frozen=True)
class CheckpointInfo:
    """One complete checkpoint as seen in a listing."""

    step: int
    path: Path
    kind: CheckpointKind
    metric: float | None = None
    wall_time: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Restored:
    """What :meth:`CheckpointStore.restore` loaded, and what it skipped and why."""

    info: CheckpointInfo
    state: Any
    skipped: tuple[str, ...] = ()


Loader = Callable[[Path], Any]
DirWriter = Callable[[Path], object]  # what it returns is ignored


def keep_from_env(environ: Mapping[str, str] | None = None, default: int = DEFAULT_KEEP) -> int:
    """The number of checkpoints to keep: ``$CHAIN_KEEP_CHECKPOINTS`` when it
    is a positive integer, else ``default`` (with a warning when it is set
    to anything else: an app must not stop over it, nor keep fewer than one)."""
    text = (os.environ if environ is None else environ).get(KEEP_ENV, "").strip()
    if not text:
        return default
    if re.fullmatch(r"[0-9]{1,7}", text) and 1 <= int(text) <= _MAX_KEEP:
        return int(text)
    log.warning("%s=%r is not a positive integer: keeping %d checkpoints", KEEP_ENV, text[:40], default)
    return default


def ckpt_name(step: int, kind: CheckpointKind) -> str:
    return f"ckpt-{step:012d}.{kind.value}"


def check_step(step: int) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 10**12:
        raise ValueError(f"step must be an int in [0, 1e12), got {step!r}")


def remove_checkpoint(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        # Unpublish first with one atomic rename: an rmtree killed half-way
        # must not leave a directory that still looks complete (DONE present,
        # shards gone) under its checkpoint name.
        doomed = path.with_name(f"{TMP_PREFIX}del-{path.name}.{os.getpid()}")
        try:
            os.replace(path, doomed)
        except OSError:
            doomed = path
        shutil.rmtree(doomed, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def mark_complete(directory: Path) -> None:
    """Commit a checkpoint directory another writer filled (a Trainer's
    ``checkpoint-N``): every file fsync'ed, then a ``DONE`` marker listing
    their sizes, written last, so chain can tell the directory complete (and
    a file truncated later). Call it before the counter moves; sizes only, no
    checksum: it runs at every save."""
    if directory.is_symlink() or not directory.is_dir():
        log.warning("not marking %s complete: not a directory", directory)
        return
    files: dict[str, dict[str, int]] = {}
    for path in sorted(directory.rglob("*")):
        if path.name == DONE_MARKER or path.is_symlink() or not path.is_file():
            continue
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())  # durable before the marker says so
            files[path.relative_to(directory).as_posix()] = {"size": os.fstat(fh.fileno()).st_size}
    for sub in sorted({p.parent for p in directory.rglob("*")} | {directory}):
        fsync_dir(sub)
    write_done_marker(directory, {"files": files})
