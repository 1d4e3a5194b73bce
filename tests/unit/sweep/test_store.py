"""The sweep directory: its record read as hostile input, the sweep file read safely."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chain.core.settings import Settings
from chain.errors import ChainDirError, ConfigError
from chain.sweep.params import Point
from chain.sweep.record import PointEntry, SweepRecord
from chain.sweep.store import SweepDir, read_sweep_file


def test_a_record_written_is_read_back(tmp_path: Path) -> None:
    store = SweepDir(tmp_path / "s")
    record = SweepRecord.new(Settings(app_cmd="true {x}"), [Point.of({"x": 1})], 5.0)
    store.make()
    store.write(record)
    assert store.exists() and store.read() == record
    entry = record.points[0]
    directory = store.prepare_point(entry)
    assert directory == tmp_path / "s" / "x=1" and (directory / "params.json").read_text() == '{"x": 1}\n'
    assert store.chain_dir(entry) == directory / ".chain"


@pytest.mark.parametrize(
    ("params", "message"),
    [({"x": 10**19}, "a number of 20 digits"), ({"x": "v" * 1001}, "a value of 1001 characters")],
)
def test_a_record_that_would_not_read_back_is_not_written(
    tmp_path: Path, params: dict[str, object], message: str
) -> None:
    """Points made without the parameter checks (a Hydra job's overrides
    were) must not leave a sweep.json every command calls damaged; the
    record already there stays as it was."""
    store = SweepDir(tmp_path / "s")
    store.make()
    good = SweepRecord.new(Settings(app_cmd="true {x}"), [Point.of({"x": 1})], 5.0)
    store.write(good)
    bad = good.with_entries([PointEntry.of(Point(tuple(params.items())))])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=f"could not read back: .*{message}") as caught:
        store.write(bad)
    assert "\n" not in str(caught.value) and store.read() == good


def test_a_record_past_its_size_cap_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chain.sweep import store as store_module

    monkeypatch.setattr(store_module, "RECORD_CAP", 2000)
    store = SweepDir(tmp_path / "s")
    store.make()
    points = [Point.of({"x": "v" * 500, "i": i}) for i in range(5)]
    with pytest.raises(ConfigError, match="fewer points or shorter values"):
        store.write(SweepRecord.new(Settings(app_cmd="true {x}"), points, 5.0))
    assert not store.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "no sweep in"), (b"{", "is damaged"), (b"[]", "not a sweep record"), (b"1" * 5000, "is damaged")],
)
def test_a_missing_or_damaged_record_is_one_line(tmp_path: Path, content: bytes | None, message: str) -> None:
    if content is not None:
        (tmp_path / "sweep.json").write_bytes(content)
    with pytest.raises(ChainDirError, match=message) as caught:
        SweepDir(tmp_path).read()
    assert "\n" not in str(caught.value)


def test_a_fifo_is_never_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "sweep.json")
    with pytest.raises(ChainDirError, match="cannot read"):
        SweepDir(tmp_path).read()
    os.mkfifo(tmp_path / "sweep.toml")
    with pytest.raises(ConfigError, match="name a regular file"):
        read_sweep_file(tmp_path / "sweep.toml")


def test_the_sweep_file_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_sweep_file(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_sweep_file(tmp_path / "bad.toml")
    (tmp_path / "ok.toml").write_text('app_cmd = "x"\n[grid]\na = [1, 2]\n')
    assert len(read_sweep_file(tmp_path / "ok.toml").points) == 2


def test_a_point_directory_is_one_component_of_the_sweeps(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsafe point name"):
        SweepDir(tmp_path).point_dir(PointEntry("../x", Point.of({"x": 1})))


def test_a_file_where_the_sweep_would_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ChainDirError, match="cannot make the sweep directory"):
        SweepDir(tmp_path / "f" / "s").make()
