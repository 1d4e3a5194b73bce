"""Atomic writes: single files, the progress counter, and sharded directories.

Every write here goes to a temporary name in the destination's own directory,
is flushed and fsync'ed, and is then published with ``os.replace`` (atomic
within one filesystem) followed by an fsync of the directory, so that the
visible name always holds either the complete old content or the complete new
content, never a truncated file.

A sharded checkpoint is a directory; no rename covers all of its files at
once from several writers, so a directory counts as complete only when it
holds a ``DONE`` marker, written last.  :func:`publish_dir` does both: the
shards go into a scratch directory, the marker is written last, and the
scratch directory is renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chain.primitives import bounded, safeio

__all__ = [
    "DONE_MARKER",
    "TMP_PREFIX",
    "CounterFormatError",
    "fsync_dir",
    "is_complete_dir",
    "parse_counter",
    "publish_dir",
    "read_counter",
    "read_done_marker",
    "sha256_file",
    "tmp_name",
    "write_bytes_atomic",
    "write_counter",
    "write_done_marker",
    "write_json_atomic",
    "write_text_atomic",
]

DONE_MARKER = "DONE"
"""Name of the completion marker inside a sharded checkpoint directory."""

TMP_PREFIX = ".tmp-"
"""Prefix of every temporary name this module creates (never a checkpoint)."""

_COUNTER_RE = re.compile(r"[0-9]+")
COUNTER_CAP = 1 << 20  # bytes of a counter file read at most: it holds one number


class CounterFormatError(ValueError):
    """The progress counter file exists but does not hold a plain integer.

    ``text`` is what it holds (at most 40 characters, stripped)."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


def tmp_name(final: Path) -> Path:
    """Temporary sibling of ``final``: same directory (so the rename is atomic),
    a hidden prefix (so listings skip it) and the pid (so two writers never
    share a temporary)."""
    return final.with_name(f"{TMP_PREFIX}{final.name}.{os.getpid()}")


def fsync_dir(directory: Path) -> None:
    """Make a rename inside ``directory`` durable.

    Some filesystems (and all non-POSIX platforms) refuse to open a directory
    for fsync; the rename is still atomic there, only its durability is up to
    the filesystem, so that case is not an error.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, durable: bool = True, mode: int = 0o666) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename).

    The temporary is created with ``O_EXCL | O_NOFOLLOW`` in the target's
    directory: a file or symlink planted under its name is never followed
    (it is removed and the create repeated once). ``mode`` is masked by the
    umask, as for ``open``. With ``durable=False`` the fsyncs are skipped:
    the rename is still atomic against a killed process, but not against a
    power loss.
    """
    final = Path(path)
    dir_fd = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_at(dir_fd, final.name, data, durable=durable, mode=mode)
    finally:
        os.close(dir_fd)


def write_at(dir_fd: int, name: str, data: bytes, *, durable: bool = True, mode: int = 0o666) -> None:
    """The one atomic write (``write_bytes_atomic``'s): ``name`` in the
    directory ``dir_fd`` replaced by ``data``. What is at ``name`` is
    replaced, never followed (a link there is replaced by the file)."""
    tmp = tmp_name(Path(name)).name
    try:
        fd = _create_exclusive(dir_fd, tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())  # the data is durable before the rename
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # atomic, within one filesystem only
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        with contextlib.suppress(OSError):  # refused by some file systems: the rename is still atomic
            os.fsync(dir_fd)  # and the rename itself is durable


def _create_exclusive(dir_fd: int, name: str, mode: int) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except FileExistsError:  # left by a killed writer with our pid, or planted
        os.unlink(name, dir_fd=dir_fd)
        return os.open(name, flags, mode, dir_fd=dir_fd)


def write_text_atomic(path: str | os.PathLike[str], text: str, *, durable: bool = True, mode: int = 0o666) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"), durable=durable, mode=mode)


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, durable: bool = True) -> None:
    """Write ``obj`` as JSON to ``path`` atomically."""
    write_bytes_atomic(path, json_bytes(obj), durable=durable)


def json_bytes(obj: Any) -> bytes:
    """The one form of a JSON file chain writes: keys sorted, one newline."""
    return (json.dumps(obj, sort_keys=True) + "\n").encode("utf-8")


def write_counter(path: str | os.PathLike[str], value: int) -> None:
    """Publish the progress counter: decimal digits and one newline, atomically.

    Call this only after the checkpoint holding ``value`` iterations is itself
    complete and durable: the submitter trusts this number, so it must never
    be ahead of the real checkpoint.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"progress counter must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"progress counter must be non-negative, got {value}")
    write_text_atomic(path, f"{value}\n")


def read_counter(path: str | os.PathLike[str]) -> int | None:
    """Read the progress counter; ``None`` when the file does not exist.

    Raises :class:`CounterFormatError` for anything other than a plain integer
    (surrounding whitespace allowed): silently reading garbage as 0 would
    restart the work, reading ``v2 iter 10`` as 210 would skip it.
    """
    try:
        data = safeio.read_file(Path(path), COUNTER_CAP)  # a FIFO, a device, gigabytes: refused, never waited on
    except FileNotFoundError:
        return None
    return parse_counter(data.decode("utf-8", errors="replace"), path)


def parse_counter(text: str, path: str | os.PathLike[str] = "CKPT_PATH") -> int:
    """The counter in ``text``, strictly: one non-negative integer, nothing else
    (the one parser of the counter, for the app side and the chain alike)."""
    stripped = text.strip()
    if not _COUNTER_RE.fullmatch(stripped):
        raise CounterFormatError(f"{path}: not a plain integer: {stripped[:40]!r}", stripped[:40])
    try:
        return bounded.parse_int(stripped)
    except bounded.BoundError as exc:
        raise CounterFormatError(f"{path}: {exc}, not a counter", bounded.shown(stripped)) from None


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    import hashlib  # here: `chain status` imports this module and never hashes

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def write_done_marker(directory: Path, manifest: Mapping[str, Any]) -> None:
    """Write the ``DONE`` marker (a JSON manifest) into ``directory``, last.

    Every shard must already be complete and fsync'ed: the marker is the one
    thing a resume looks at to decide that the directory is usable.
    """
    write_json_atomic(directory / DONE_MARKER, dict(manifest))


def read_done_marker(directory: Path) -> dict[str, Any] | None:
    """The manifest of a complete directory; ``None`` when there is no marker.

    Raises ``ValueError`` when the marker exists but is not a JSON object.
    """
    try:
        text = (directory / DONE_MARKER).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"{directory / DONE_MARKER}: not a JSON object")  # noqa: TRY004 - bad data
    return obj


def is_complete_dir(directory: Path) -> bool:
    """True when ``directory`` is a directory holding a ``DONE`` marker."""
    return directory.is_dir() and (directory / DONE_MARKER).is_file()


def _manifest_files(directory: Path) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file() and p.name != DONE_MARKER:
            # fsync every shard here: the writer callback may not have.
            with open(p, "rb") as fh:
                os.fsync(fh.fileno())
            rel = p.relative_to(directory).as_posix()
            files[rel] = {"size": p.stat().st_size, "sha256": sha256_file(p)}
    for d in sorted({p.parent for p in directory.rglob("*")} | {directory}):
        fsync_dir(d)
    return files


@contextlib.contextmanager
def publish_dir(final: Path, meta: Mapping[str, Any] | None = None) -> Iterator[Path]:
    """Context manager yielding a scratch directory to fill with shards.

    On normal exit the shards are fsync'ed, a ``DONE`` manifest (file sizes,
    SHA-256 and ``meta``) is written last, and the scratch directory is
    renamed to ``final``.  On an exception the scratch directory is removed
    and ``final`` is untouched.  An existing ``final`` is replaced: it is
    moved aside first and deleted only after the new one is in place.
    """
    import shutil  # here: it loads compression modules an app's counter write does not need

    scratch = tmp_name(final)
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    try:
        yield scratch
        manifest: dict[str, Any] = {"files": _manifest_files(scratch)}
        if meta:
            manifest["meta"] = dict(meta)
        write_done_marker(scratch, manifest)
        aside: Path | None = None
        if final.exists():
            aside = final.with_name(f"{TMP_PREFIX}old-{final.name}.{os.getpid()}")
            os.replace(final, aside)
        os.replace(scratch, final)
        fsync_dir(final.parent)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
