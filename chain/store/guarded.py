"""The one way into a chain directory.

Every read and write of a chain directory's files goes through
:class:`Guarded` (``ChainDir``'s methods, and the path helpers of
``chain.store.jsonio``): a name inside the directory (no ``..``), each
directory below the root a real one of this user's, the file a regular one,
reached through no link (``chain.primitives.safeio``), read up to the cap of
its kind or only its end. JSON is read within bounds
(``chain.primitives.bounded``): too deep, a number too long or out of range
is a corrupt file, in one line.

A refusal is a :class:`ChainFileError`, both a ``ChainDirError`` (a command
says it in one line and exits 2) and an ``OSError`` (a job's write fails as on
a file system that refuses it), naming the file and what to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.errors import ChainDirError
from chain.primitives import atomic, bounded, safeio

JSON_CAP = 1 << 20  # state.json, settings.json, a runner record: a few KiB each
RUNNERS_CAP = 256 << 20  # runners.jsonl: ~400 000 judged runners
LINE_CAP = 64 << 10  # one line of runners.jsonl (chain's are under 1 KiB)
IDS_CAP = 16 << 20  # worker_ids.txt, submitter_ids.txt
OUTPUT_TAIL = 4 << 20  # the end of a job's output that ``chain logs`` prints


class ChainFileError(ChainDirError, OSError):
    """A file or directory of the chain directory that chain will not use."""


@contextlib.contextmanager
def refusals(path: Path | None = None) -> Iterator[None]:
    """``safeio``'s refusals as :class:`ChainFileError`; any other
    ``OSError`` named by ``path``, the chain's file (not the temporary or
    the directory-relative name the system call saw)."""
    try:
        yield
    except safeio.UnsafeFileError as exc:
        raise ChainFileError(str(exc)) from None
    except OSError as exc:
        if path is not None and exc.errno is not None:
            exc.filename, exc.filename2 = str(path), None
        raise


def decode_json(data: bytes, path: Path, what: str) -> Any:
    """A JSON file's content, or a one-line ``ChainDirError`` calling it corrupt."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ChainDirError(f"{what} {path} is corrupt: not UTF-8 text") from None
    try:
        return bounded.loads_json(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise ChainDirError(f"{what} {path} is corrupt: the file is empty") from None
        raise ChainDirError(
            f"{what} {path} is corrupt: not valid JSON (line {exc.lineno}: {exc.msg[:1].lower()}{exc.msg[1:]})"
        ) from None
    except bounded.BoundError as exc:
        raise ChainDirError(f"{what} {path} is corrupt: {exc}") from None


@dataclass(frozen=True)
class Guarded:
    """The files below ``root`` (the chain directory, as the user named it),
    by names relative to it (``runners/12.json``)."""

    root: Path

    def _split(self, rel: str) -> tuple[list[str], str]:
        parts = rel.split("/")
        if any(part in ("", ".", "..") or "\0" in part for part in parts):
            raise ChainFileError(f"{rel!r} is not a name inside the chain directory {self.root}")
        return parts[:-1], parts[-1]

    @contextlib.contextmanager
    def _open(self, rel: str, flags: int, *, mode: int = 0o666) -> Iterator[int]:
        """``rel`` opened (``safeio.open_at``); a refusal in the caller's block, too, is a ``ChainFileError``."""
        dirs, name = self._split(rel)
        with refusals(self.root / rel):
            with safeio.dir_at(self.root, dirs) as dir_fd:
                fd = safeio.open_at(dir_fd, name, flags, self.root / rel, mode=mode)
            try:
                yield fd
            finally:
                os.close(fd)

    # --- reading ---------------------------------------------------------------------
    def read_bytes(self, rel: str, limit: int) -> bytes:
        """All of the file, at most ``limit`` bytes. FileNotFoundError when missing."""
        with self._open(rel, os.O_RDONLY) as fd:
            return safeio.read_capped(fd, limit, self.root / rel)

    def read_json(self, rel: str, what: str, limit: int = JSON_CAP) -> Any:
        """A JSON file of chain's (``what``: how messages name it). FileNotFoundError when missing."""
        path = self.root / rel
        try:
            data = self.read_bytes(rel, limit)
        except (FileNotFoundError, ChainFileError):
            raise
        except OSError as exc:
            raise ChainDirError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
        return decode_json(data, path, what)

    def lines(self, rel: str, *, limit: int = RUNNERS_CAP, line_limit: int = LINE_CAP) -> Iterator[str]:
        """The file's lines in order (none when it is missing); a line longer
        than ``line_limit`` is skipped, a file larger than ``limit`` refused."""
        try:
            with self._open(rel, os.O_RDONLY) as fd:
                safeio.check_size(fd, limit, self.root / rel)
                for line in safeio.iter_lines(fd, line_limit):
                    yield line.decode("utf-8", "replace")
        except FileNotFoundError:
            return

    def count_lines(self, rel: str, *, limit: int = RUNNERS_CAP) -> int:
        """How many lines the file has (0 when it is missing)."""
        try:
            with self._open(rel, os.O_RDONLY) as fd:
                safeio.check_size(fd, limit, self.root / rel)
                return safeio.count_lines(fd)
        except FileNotFoundError:
            return 0

    def tail(self, rel: str, max_bytes: int, *, lines: int | None = None) -> tuple[bytes, int]:
        """The file's end (``safeio.read_tail``) and the offset it starts at.
        FileNotFoundError when missing."""
        with self._open(rel, os.O_RDONLY) as fd:
            return safeio.read_tail(fd, max_bytes, lines=lines)

    def tail_lines(self, rel: str, count: int, *, max_bytes: int = 16384) -> list[str]:
        """The last ``count`` lines of the file ``rel``, reading backwards from
        its end no more than needed and at most ``max_bytes`` (a runner's
        output can be large, ``runners.jsonl`` long); [] if it is missing or
        unreadable, a refusal if it is not a file of chain's. A line cut at
        the ``max_bytes`` limit is dropped."""
        if count <= 0:
            return []
        try:
            data, start = self.tail(rel, max_bytes, lines=count)
        except ChainFileError:
            raise
        except OSError:
            return []
        lines = data.decode("utf-8", "replace").splitlines()
        if start > 0 and lines:
            lines = lines[1:]  # the first one may be cut
        return lines[-count:]

    def read_span(self, rel: str, offset: int, limit: int) -> bytes:
        """At most ``limit`` bytes from ``offset``. FileNotFoundError when missing."""
        with self._open(rel, os.O_RDONLY) as fd:
            return safeio.read_span(fd, offset, limit)

    def exists(self, rel: str) -> bool:
        """Something is at ``rel`` (a link counts: it is not followed)."""
        dirs, name = self._split(rel)
        try:
            with refusals(), safeio.dir_at(self.root, dirs) as dir_fd:
                os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    # --- writing ---------------------------------------------------------------------
    def append(self, rel: str, data: bytes, *, mode: int = 0o666, durable: bool = False) -> None:
        """``data`` appended in one write (``O_APPEND``); the file made when missing."""
        with self._open(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode=mode) as fd:
            safeio.write_all(fd, data)
            if durable:
                os.fsync(fd)

    def open_append(self, rel: str) -> int:
        """A descriptor appending to ``rel`` (a job's output file), its
        directories made when missing; the caller closes it."""
        dirs, name = self._split(rel)
        with refusals(self.root / rel), safeio.dir_at(self.root, dirs, create=True) as dir_fd:
            return safeio.open_at(dir_fd, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, self.root / rel)

    def write(self, rel: str, data: bytes, *, mode: int = 0o666, durable: bool = True) -> None:
        """Replace ``rel`` with ``data`` atomically (``atomic.write_at``): a
        link at its name is replaced, never followed; its directories made
        when missing."""
        dirs, name = self._split(rel)
        with refusals(self.root / rel), safeio.dir_at(self.root, dirs, create=True) as dir_fd:
            try:
                atomic.write_at(dir_fd, name, data, durable=durable, mode=mode)
            except IsADirectoryError:
                raise safeio.refusal(self.root / rel, "is not a regular file but a directory") from None

    def unlink(self, rel: str) -> None:
        """Remove ``rel`` if it is there (a link is removed, not followed)."""
        dirs, name = self._split(rel)
        try:
            with refusals(self.root / rel), safeio.dir_at(self.root, dirs) as dir_fd:
                os.unlink(name, dir_fd=dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return
        except IsADirectoryError:
            raise ChainFileError(f"{self.root / rel} is not a regular file but a directory: remove it") from None

    def make_dirs(self, *rels: str) -> None:
        """Make each directory (and those above it) when missing; each must be a real one of this user's."""
        for rel in rels:
            dirs, name = self._split(rel)
            with refusals(self.root / rel), safeio.dir_at(self.root, [*dirs, name], create=True):
                pass

    # --- paths handed out ------------------------------------------------------------
    def checked(self, rel: str, *, directory: bool = False) -> Path:
        """``root/rel``, once each directory on the way is a real one of this
        user's and what is at ``rel``, if anything, is a regular file (a
        ``directory``): for callers that open the path themselves."""
        dirs, name = self._split(rel)
        parts = [*dirs, name]
        where = self.root
        for depth, part in enumerate(parts):
            where = where / part
            try:
                info = os.lstat(where)
            except (FileNotFoundError, NotADirectoryError):
                return self.root / rel  # nothing there (yet): nothing to follow
            is_dir = directory or depth < len(parts) - 1
            if not (stat.S_ISDIR if is_dir else stat.S_ISREG)(info.st_mode):
                raise ChainFileError(
                    str(safeio.not_wanted(where, info.st_mode, "a directory" if is_dir else "a regular file"))
                )
            if is_dir and info.st_uid != os.geteuid():
                raise ChainFileError(str(safeio.foreign(where, info.st_uid)))
        return where
