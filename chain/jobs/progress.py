"""``--progress-pattern``: how far the app got, from what it printed.

The runner's stdout (fd 1) is the job's log file on every backend, and the
app inherits it: the runner notes the file's size when the app starts and,
after the app has ended, scans what was written since for the first and the last line the pattern
matches (``core.counterspec``): the first in the first ``SCAN_BYTES``, the
last in the last ``SCAN_BYTES``. From the two, the report tells how many
iterations the app computed, and so how many it lost when it was killed.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from chain.core.counterspec import first_iteration, last_iteration

SCAN_BYTES = 4 << 20  # the app's last output scanned: a match is near the end, and the log may be huge


def log_offset(fd: int = 1) -> int | None:
    """The size of the file on ``fd`` (the job's log) now; None when ``fd``
    is not a regular file (a terminal, a pipe: nothing to scan later)."""
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def written_since(offset: int, fd: int = 1, *, limit: int = SCAN_BYTES) -> str:
    """What was written to the file on ``fd`` after ``offset``: its last
    ``limit`` bytes at most, a line cut at that limit dropped. The file is
    opened again for reading (fd 1 is open for writing only); "" when it
    cannot be, or is not the same file."""
    return _read(offset, fd, limit, head=False)


def written_after(offset: int, fd: int = 1, *, limit: int = SCAN_BYTES) -> str:
    """As ``written_since``, but the first ``limit`` bytes after ``offset``
    (a line cut at the end dropped)."""
    return _read(offset, fd, limit, head=True)


def _read(offset: int, fd: int, limit: int, *, head: bool) -> str:
    try:
        info = os.fstat(fd)
        with open(f"/proc/self/fd/{fd}", "rb") as fh:
            again = os.fstat(fh.fileno())
            if (again.st_dev, again.st_ino) != (info.st_dev, info.st_ino):
                return ""
            end = again.st_size
            start = offset if head else max(offset, end - limit)
            fh.seek(start)
            data = fh.read(min(end, start + limit) - start)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    if head:
        return text if start + len(data) >= end else text.rpartition("\n")[0]
    return text.partition("\n")[2] if start > offset else text


def iterations_printed(pattern: str, offset: int | None, fd: int = 1) -> tuple[int | None, int | None]:
    """(first, last) iteration the app printed since ``offset``, by
    ``pattern``; (None, None) without a pattern, an offset or a match."""
    if not pattern or offset is None:
        return None, None
    compiled = re.compile(pattern)
    last = last_iteration(written_since(offset, fd), compiled)
    if last is None:
        return None, None
    return first_iteration(written_after(offset, fd), compiled), last


def progress_marks(paths: list[Path]) -> tuple[tuple[int, int] | int | None, ...]:
    """The signs of an app's progress the stall watchdog compares
    (``core.stall``): each file's size and modification time (None when it
    is not there) and the size of the job's log on fd 1 (``log_offset``)."""
    marks: list[tuple[int, int] | int | None] = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            marks.append(None)
            continue
        marks.append((info.st_size, info.st_mtime_ns))
    marks.append(log_offset())
    return tuple(marks)
