"""chain.jobs.progress: what the app wrote to the job's log since it started,
read back through the runner's own fd 1 (open for writing only)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.jobs.progress import iterations_printed, log_offset, written_after, written_since


@pytest.fixture
def log_fd(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "job.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    yield fd
    os.close(fd)


def test_only_what_was_written_after_the_offset_is_scanned(log_fd: int) -> None:
    os.write(log_fd, b"iter 99: from the runner before\n")
    offset = log_offset(log_fd)
    assert offset == 32
    os.write(log_fd, b"iter 1: loss 2.0\niter 2: loss 1.9\nchain runner 1 (job 3): app killed\n")
    assert written_since(offset, log_fd).startswith("iter 1: loss")
    assert iterations_printed(r"^iter (\d+):", offset, log_fd) == (1, 2)


def test_nothing_matched_or_no_pattern_is_none(log_fd: int) -> None:
    offset = log_offset(log_fd)
    os.write(log_fd, b"starting\n")
    assert iterations_printed(r"^iter (\d+):", offset, log_fd) == (None, None)
    assert iterations_printed("", offset, log_fd) == (None, None)
    assert iterations_printed(r"^iter (\d+):", None, log_fd) == (None, None)


def test_the_read_is_bounded_and_drops_the_cut_line(log_fd: int) -> None:
    offset = log_offset(log_fd)
    assert offset is not None
    os.write(log_fd, b"".join(f"iter {i}: loss\n".encode() for i in range(1, 2001)))
    tail = written_since(offset, log_fd, limit=100)
    assert len(tail) < 100 and tail.startswith("iter ") and tail.endswith("iter 2000: loss\n")
    head = written_after(offset, log_fd, limit=100)
    assert len(head) < 100 and head.startswith("iter 1: loss\n") and head.endswith(": loss")


def test_the_first_and_the_last_printed_iteration_since_the_offset(log_fd: int) -> None:
    """A resumed app: the first iteration it printed is where it resumed, not the runner before's."""
    os.write(log_fd, b"iter 7: from the runner before\n")
    offset = log_offset(log_fd)
    os.write(log_fd, b"Resuming\n" + b"".join(f"iter {i}: loss\n".encode() for i in range(40, 300)))
    assert iterations_printed(r"^iter (\d+):", offset, log_fd) == (40, 299)


def test_a_log_that_is_not_a_regular_file_gives_no_offset() -> None:
    read_end, write_end = os.pipe()
    try:
        assert log_offset(write_end) is None
    finally:
        os.close(read_end)
        os.close(write_end)
