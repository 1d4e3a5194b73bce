"""The chain directory's files by path (``chain.store.jsonio``): a file's
tail, atomic JSON, the app's counter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chain.errors import ChainDirError, CheckpointError
from chain.store.jsonio import read_counter, read_json, tail_lines, write_json


def test_tail_lines_reads_only_the_end(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("".join(f"line {i}\n" for i in range(10000)))
    assert tail_lines(path, 3) == ["line 9997", "line 9998", "line 9999"]
    assert tail_lines(path, 3, max_bytes=20) == ["line 9999"]  # the cut line is dropped
    assert tail_lines(tmp_path / "missing", 3) == [] and tail_lines(path, 0) == []


def test_json_is_written_whole_over_a_link_and_read_back(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "state.json").symlink_to(victim)
    write_json(tmp_path / "c" / "state.json", {"chain_id": "c-1", "n": [1, 2]})
    assert victim.read_text() == "precious\n"  # the link is replaced, never followed
    assert read_json(tmp_path / "c" / "state.json", "state file") == {"chain_id": "c-1", "n": [1, 2]}
    write_json(tmp_path / "new" / "deeper" / "s.json", 7)  # its directory is made
    assert read_json(tmp_path / "new" / "deeper" / "s.json", "state file") == 7


def test_a_json_file_that_is_not_json_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"max_iter": ')
    with pytest.raises(ChainDirError) as err:
        read_json(tmp_path / "settings.json", "settings file")
    assert "settings.json" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json", "settings file")


def test_the_counter_is_zero_when_absent_and_an_error_unless_a_plain_integer(tmp_path: Path) -> None:
    assert read_counter(tmp_path / "state_iter.txt") == 0
    (tmp_path / "state_iter.txt").write_text("120\n")
    assert read_counter(tmp_path / "state_iter.txt") == 120
    (tmp_path / "state_iter.txt").write_text("v2 iter 10")
    with pytest.raises(CheckpointError, match="does not hold a plain integer: 'v2 iter 10'"):
        read_counter(tmp_path / "state_iter.txt")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(CheckpointError, match="^checkpoint counter .*fifo is not a regular file but a FIFO"):
        read_counter(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    with pytest.raises(CheckpointError, match="^checkpoint counter "):
        read_counter(tmp_path / "dir")
