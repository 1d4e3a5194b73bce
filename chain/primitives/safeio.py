"""Files opened without trusting what is at their names.

A directory chain keeps may hold what chain never put there: a symbolic
link to a file elsewhere (a write through it lands outside), a FIFO (a read
waits for a writer forever), a device (``/dev/zero`` never ends), a file of
gigabytes. Here, every open

- is ``O_NONBLOCK`` (opening a FIFO never waits) and is checked with
  ``fstat`` to be a regular file before a byte moves;
- takes its last component with ``O_NOFOLLOW`` when it is inside a chain's
  directory (``open_at``): a link there is refused, never followed;
- reads at most a cap, or only a file's end.

Directories below a root are opened one component at a time, each with
``O_DIRECTORY | O_NOFOLLOW`` and checked to be this user's (``open_dir``), so
no component is a link out. A refusal is an :class:`UnsafeFileError`, an
``OSError`` whose message names the path and says what to do. Standard
library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "UnsafeFileError",
    "check_size",
    "count_lines",
    "describe",
    "dir_at",
    "foreign",
    "iter_lines",
    "not_wanted",
    "open_at",
    "open_dir",
    "open_file",
    "read_capped",
    "read_file",
    "read_lines",
    "read_span",
    "read_tail",
    "refusal",
    "write_all",
]

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFREG: "a regular file",
}
_READ_STEP = 1 << 16


class UnsafeFileError(OSError):
    """A file or directory chain will not use: a link, not a regular file
    (or not a directory), another user's directory, too large. ``where`` is
    its path, ``problem`` what is wrong with it (``is not a regular file but a FIFO``)."""

    where: str = ""
    problem: str = ""


def refusal(where: str | os.PathLike[str], problem: str, advice: str = "remove it") -> UnsafeFileError:
    """The error for ``where``: ``<where> <problem>: <advice>``."""
    exc = UnsafeFileError(f"{where} {problem}: {advice}")
    exc.where, exc.problem = str(where), problem
    return exc


def describe(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words (``a FIFO``)."""
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def size_text(size: int) -> str:
    """A byte count as people read it (``1.0 MiB``)."""
    if size < 1024:
        return f"{size} bytes"
    value, unit = size / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}"


def not_wanted(where: str | os.PathLike[str], mode: int | None, wanted: str) -> UnsafeFileError:
    """The refusal of ``where``, whose ``st_mode`` (None: unknown) is not ``wanted`` (``a directory``)."""
    if mode is not None and stat.S_ISLNK(mode):
        return refusal(
            where, "is a symbolic link", "chain follows no link in its directory (it could lead anywhere); remove it"
        )
    return refusal(where, f"is not {wanted} but {describe(mode) if mode is not None else 'something else'}")


def foreign(where: str | os.PathLike[str], uid: int) -> UnsafeFileError:
    """The refusal of a directory of another user's."""
    return refusal(where, f"belongs to another user (uid {uid})", "chain uses only directories of its own; remove it")


def _unexpected(dir_fd: int, name: str, where: Path, wanted: str) -> UnsafeFileError:
    try:
        mode: int | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = None
    return not_wanted(where, mode, wanted)


def _own_dir(fd: int, where: Path) -> None:
    uid = os.fstat(fd).st_uid
    if uid != os.geteuid():
        raise foreign(where, uid)


def open_dir(root: Path, parts: Sequence[str] = (), *, create: bool = False) -> int:
    """A descriptor of ``root/parts...``: ``root`` as given (links in it are
    the caller's), each part a real directory of this user's, none followed
    if it is a link; with ``create``, each part made when missing."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    where = root
    try:
        for part in parts:
            where = where / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _unexpected(fd, part, where, "a directory") from None
                raise
            os.close(fd)
            fd = child
            _own_dir(fd, where)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def dir_at(root: Path, parts: Sequence[str] = (), *, create: bool = False) -> Iterator[int]:
    """``open_dir`` as a context manager: the descriptor is closed after."""
    fd = open_dir(root, parts, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_at(dir_fd: int, name: str, flags: int, where: Path, *, mode: int = 0o666) -> int:
    """Open ``name`` in ``dir_fd``, a regular file only, never through a link
    (``where``: its path, for the message). FileNotFoundError as ``os.open``."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP: a link; ENXIO: a FIFO without a reader (or a device) opened to write; EISDIR
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            raise _unexpected(dir_fd, name, where, "a regular file") from None
        raise
    return _regular(fd, where)


def _regular(fd: int, where: str | os.PathLike[str]) -> int:
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_wanted(where, mode, "a regular file")
    return fd


def check_size(fd: int, limit: int, where: str | os.PathLike[str], size: int | None = None) -> None:
    """Refuse a file of more than ``limit`` bytes (``size``: as counted, else its ``fstat``)."""
    size = os.fstat(fd).st_size if size is None else size
    if size > limit:
        raise refusal(
            where,
            f"is {size_text(size)}, more than the {size_text(limit)} chain reads of it",
            "it is not a file chain wrote; move it away",
        )


def read_capped(fd: int, limit: int, where: str | os.PathLike[str]) -> bytes:
    """All of a regular file, refused when it holds more than ``limit`` bytes."""
    check_size(fd, limit, where)
    chunks: list[bytes] = []
    got = 0
    while chunk := os.read(fd, min(_READ_STEP, limit + 1 - got)):
        chunks.append(chunk)
        got += len(chunk)
        check_size(fd, limit, where, got)  # it grew while read
    return b"".join(chunks)


def read_file(path: Path, limit: int) -> bytes:
    """A regular file named by the user (links followed: the name is theirs),
    at most ``limit`` bytes; a FIFO or a device is refused, never waited on."""
    fd = _regular(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), path)
    try:
        return read_capped(fd, limit, path)
    finally:
        os.close(fd)


def open_file(path: Path) -> int:
    """A descriptor of a regular file named by the user (links followed: the
    name is theirs); a FIFO or a device is refused, never waited on."""
    return _regular(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), path)


def read_lines(path: Path, limit: int, line_limit: int) -> Iterator[bytes]:
    """A file named by the user (``open_file``), line by line (``iter_lines``:
    one longer than ``line_limit`` is skipped), so that memory holds one line
    at a time: refused when it holds more than ``limit`` bytes, or grows past
    them while read. A generator: the refusal comes with the first line."""
    fd = open_file(path)
    try:
        check_size(fd, limit, path)
        for line in iter_lines(fd, line_limit):
            check_size(fd, limit, path, os.lseek(fd, 0, os.SEEK_CUR))  # iter_lines' reader shares the offset
            yield line
    finally:
        os.close(fd)


def read_tail(fd: int, max_bytes: int, *, lines: int | None = None) -> tuple[bytes, int]:
    """The end of a regular file and the offset it starts at: at most
    ``max_bytes``, and with ``lines`` no more than it takes to hold that many
    whole lines (read backwards, 4 KiB at a time)."""
    end = os.fstat(fd).st_size
    if lines is None:
        start = max(0, end - max_bytes)
        return read_span(fd, start, end - start), start
    pos, data = end, b""
    while pos > 0 and end - pos < max_bytes and data.count(b"\n") <= lines:
        step = min(4096, pos, max_bytes - (end - pos))
        pos -= step
        data = os.pread(fd, step, pos) + data
    return data, pos


def read_span(fd: int, offset: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``offset`` (fewer at the file's end)."""
    chunks: list[bytes] = []
    while limit > 0:
        chunk = os.pread(fd, min(_READ_STEP, limit), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def iter_lines(fd: int, line_limit: int) -> Iterator[bytes]:
    """A regular file's lines, in order; one longer than ``line_limit`` bytes
    is skipped whole (memory stays bounded, whatever the file holds). The
    descriptor stays open (read from its start)."""
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(os.dup(fd), "rb") as fh:
        skipping = False
        for piece in iter(lambda: fh.readline(line_limit + 1), b""):
            ended = piece.endswith(b"\n")
            if not skipping and len(piece) <= line_limit:
                yield piece
            else:
                skipping = not ended  # the rest of an over-long line follows


def count_lines(fd: int) -> int:
    """How many newlines a regular file holds, read in blocks from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    total = 0
    while block := os.read(fd, _READ_STEP):
        total += block.count(b"\n")
    return total


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (one ``write`` call when the system takes it all,
    as an ``O_APPEND`` line should)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
