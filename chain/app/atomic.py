"""Atomic writes: single files, the progress counter, and sharded directories.

The app side's name for :mod:`chain.primitives.atomic`, where the writes
live (the chain itself writes its own files with them too): every write goes
to a temporary name in the destination's directory, is fsync'ed and published
with ``os.replace``; a sharded checkpoint directory counts as complete only
when it holds a ``DONE`` marker, written last (:func:`publish_dir`).
"""

from __future__ import annotations

from chain.primitives.atomic import (
    DONE_MARKER,
    TMP_PREFIX,
    CounterFormatError,
    fsync_dir,
    is_complete_dir,
    parse_counter,
    publish_dir,
    read_counter,
    read_done_marker,
    sha256_file,
    tmp_name,
    write_bytes_atomic,
    write_counter,
    write_done_marker,
    write_json_atomic,
    write_text_atomic,
)

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
