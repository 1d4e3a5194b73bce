"""The records of a checkpoint store (``chain.app.store``): what one
checkpoint is, what a restore loaded, and the store's file names."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from chain.app.atomic import TMP_PREFIX

NAME_RE = re.compile(r"ckpt-(\d{12})\.(ckpt|d)")


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
