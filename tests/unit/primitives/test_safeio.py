"""chain.primitives.safeio: files opened without trusting what is at their
names (the atomic writer on top of it: test_atomic.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chain.primitives import safeio

pytestmark = pytest.mark.timeout(20)  # a FIFO waited on fails the test, not the run


def test_a_fifo_or_a_device_named_by_the_user_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(safeio.UnsafeFileError, match="fifo is not a regular file but a FIFO: remove it"):
        safeio.read_file(tmp_path / "fifo", 100)
    os.symlink("/dev/zero", tmp_path / "zero")  # the user's own name: followed, then refused for what it is
    with pytest.raises(safeio.UnsafeFileError, match="is not a regular file but a character device"):
        safeio.read_file(tmp_path / "zero", 100)
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(safeio.UnsafeFileError, match="big is 101 bytes, more than the 100 bytes chain reads of it"):
        safeio.read_file(tmp_path / "big", 100)


def test_no_link_below_a_root_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_text("secret")
    os.symlink(tmp_path / "elsewhere", tmp_path / "real" / "linked")
    os.symlink(tmp_path / "elsewhere" / "f", tmp_path / "real" / "f")
    with pytest.raises(safeio.UnsafeFileError, match="linked is a symbolic link"):
        safeio.open_dir(tmp_path, ["real", "linked"])
    with safeio.dir_at(tmp_path, ["real"]) as dir_fd:
        with pytest.raises(safeio.UnsafeFileError, match="real/f is a symbolic link"):
            safeio.open_at(dir_fd, "f", os.O_RDONLY, tmp_path / "real" / "f")
        with pytest.raises(safeio.UnsafeFileError, match="real/f is a symbolic link"):
            safeio.open_at(dir_fd, "f", os.O_WRONLY | os.O_APPEND, tmp_path / "real" / "f")
    assert (tmp_path / "elsewhere" / "f").read_text() == "secret"


def test_a_fifo_opened_to_write_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "log")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    with (
        safeio.dir_at(tmp_path) as dir_fd,
        pytest.raises(safeio.UnsafeFileError, match="not a regular file but a FIFO"),
    ):
        safeio.open_at(dir_fd, "log", flags, tmp_path / "log")


def test_lines_past_the_limit_are_skipped_whole(tmp_path: Path) -> None:
    data = b"one\n" + b"x" * 50 + b"\ntwo\n" + b"y" * 9 + b"\nthree"
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert list(safeio.iter_lines(fd, 10)) == [b"one\n", b"two\n", b"y" * 9 + b"\n", b"three"]
        assert safeio.count_lines(fd) == 4
        assert safeio.read_tail(fd, 8) == (data[-8:], len(data) - 8)
        assert safeio.read_tail(fd, 1000, lines=1) == (data, 0)
    finally:
        os.close(fd)


def test_a_file_named_by_the_user_is_read_line_by_line_within_its_cap(tmp_path: Path) -> None:
    (tmp_path / "log").write_bytes(b"one\n" + b"x" * 50 + b"\ntwo")
    assert list(safeio.read_lines(tmp_path / "log", 100, 10)) == [b"one\n", b"two"]
    with pytest.raises(safeio.UnsafeFileError, match="log is 58 bytes, more than the 57 bytes chain reads of it"):
        next(safeio.read_lines(tmp_path / "log", 57, 10))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(safeio.UnsafeFileError, match="fifo is not a regular file but a FIFO"):
        next(safeio.read_lines(tmp_path / "fifo", 100, 10))


def test_a_file_growing_past_its_cap_while_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "log").write_bytes(b"line\n" * 4)
    lines = safeio.read_lines(tmp_path / "log", 30, 10)
    assert next(lines) == b"line\n"
    with open(tmp_path / "log", "ab") as fh:  # 20 bytes were 40: past the cap
        fh.write(b"line\n" * 4)
    with pytest.raises(safeio.UnsafeFileError, match="more than the 30 bytes"):
        list(lines)
