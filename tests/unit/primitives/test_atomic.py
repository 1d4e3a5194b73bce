"""chain.primitives.atomic: the one atomic writer (a link at the name is
replaced, never followed; no temporary left) and the counter read from a
regular file only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chain.primitives import atomic, safeio

pytestmark = pytest.mark.timeout(20)  # a FIFO waited on fails the test, not the run


def test_the_counter_is_read_from_a_regular_file_only(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "state_iter.txt")
    with pytest.raises(safeio.UnsafeFileError, match="but a FIFO"):
        atomic.read_counter(tmp_path / "state_iter.txt")
    (tmp_path / "huge").write_text("1" * 5000)
    with pytest.raises(atomic.CounterFormatError, match="a number of 5000 digits, not a counter"):
        atomic.read_counter(tmp_path / "huge")


def test_an_atomic_write_replaces_a_link_and_never_follows_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, tmp_path / "state.json")
    atomic.write_json_atomic(tmp_path / "state.json", {"a": 1})
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "state.json").is_symlink() and (tmp_path / "state.json").read_text() == '{"a": 1}\n'
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(atomic.TMP_PREFIX)] == []
