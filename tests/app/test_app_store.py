"""CheckpointStore and atomic writes: retention, fallback, DONE markers, counter."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from chain.app import (
    BytesSerializer,
    CheckpointKind,
    CheckpointStore,
    CounterFormatError,
    MetricMode,
    publish_dir,
    read_counter,
    write_bytes_atomic,
    write_counter,
)


def make(tmp_path: Path, **kw: object) -> CheckpointStore:
    return CheckpointStore(tmp_path / "ck", counter_path=tmp_path / "ctr", durable=False, **kw)  # type: ignore[arg-type]


def test_save_and_restore_roundtrip_with_counter(tmp_path: Path) -> None:
    store = make(tmp_path)
    state = {"w": [0.1, 1e-300, float("inf")], "step": 3, "name": "x"}
    info = store.save(3, state, metric=0.5, meta={"config": {"lr": 0.1}})
    assert read_counter(tmp_path / "ctr") == 3
    assert info.kind is CheckpointKind.FILE
    restored = store.restore()
    assert restored is not None
    assert restored.state == state and restored.info.step == 3
    assert restored.info.meta == {"config": {"lr": 0.1}}
    assert restored.info.metric == 0.5


def test_retention_keeps_last_k_plus_best(tmp_path: Path) -> None:
    store = make(tmp_path, keep_last=2, metric_mode=MetricMode.MIN)
    metrics = {1: 5.0, 2: 0.5, 3: 4.0, 4: 3.0, 5: 2.0}
    for step, m in metrics.items():
        store.save(step, {"s": step}, metric=m)
        kept = [i.step for i in store.checkpoints()]
        # never fewer than promised: min(K, saves so far) of the newest, plus best
        assert kept[-min(2, step) :] == list(range(max(1, step - 1), step + 1))
    assert [i.step for i in store.checkpoints()] == [2, 4, 5]
    assert store.best() is not None and store.best().step == 2  # type: ignore[union-attr]


def test_retention_max_mode_and_no_best(tmp_path: Path) -> None:
    store = make(tmp_path, keep_last=1, metric_mode=MetricMode.MAX)
    for step, m in {1: 1.0, 2: 9.0, 3: 2.0}.items():
        store.save(step, step, metric=m)
    assert [i.step for i in store.checkpoints()] == [2, 3]
    plain = CheckpointStore(tmp_path / "p", keep_last=2, keep_best=False, durable=False)
    for step in range(1, 6):
        plain.save(step, step, metric=-step)
    assert [i.step for i in plain.checkpoints()] == [4, 5]


def test_corrupt_newest_falls_back_to_previous(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = make(tmp_path, keep_last=3)
    for step in (10, 20, 30):
        store.save(step, {"step": step})
    newest = store.latest()
    assert newest is not None
    data = bytearray(newest.path.read_bytes())
    data[-3] ^= 0xFF  # flip a payload byte: header still parses
    newest.path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="chain.app.store"):
        restored = store.restore()
    assert restored is not None and restored.info.step == 20 and restored.state == {"step": 20}
    assert "checksum" in caplog.text and "falling back" in caplog.text
    assert len(restored.skipped) == 1
    # quarantined, not deleted, and no longer listed
    assert (newest.path.parent / (newest.path.name + ".corrupt")).exists()
    assert [i.step for i in store.checkpoints()] == [10, 20]
    # the counter no longer claims progress no loadable checkpoint holds
    assert read_counter(tmp_path / "ctr") == 20


def test_truncated_and_garbage_checkpoints_are_skipped(tmp_path: Path) -> None:
    store = make(tmp_path, keep_last=5)
    for step in (1, 2, 3):
        store.save(step, {"step": step})
    infos = store.checkpoints()
    infos[2].path.write_bytes(infos[2].path.read_bytes()[:-10])  # truncated payload
    infos[1].path.write_bytes(b"garbage")  # bad magic: not even listed
    assert [i.step for i in store.checkpoints()] == [1, 3]
    restored = store.restore()
    assert restored is not None and restored.info.step == 1


def test_nothing_loadable_resets_counter(tmp_path: Path) -> None:
    store = make(tmp_path)
    store.save(5, {"a": 1})
    p = store.latest().path  # type: ignore[union-attr]
    p.write_bytes(p.read_bytes()[:-1])
    assert store.restore() is None
    assert read_counter(tmp_path / "ctr") == 0


def test_fresh_store_restores_none_and_leaves_counter_absent(tmp_path: Path) -> None:
    store = make(tmp_path)
    assert store.restore() is None
    assert read_counter(tmp_path / "ctr") is None


def test_sharded_directory_without_done_is_ignored(tmp_path: Path) -> None:
    store = make(tmp_path, keep_last=3)
    store.save(1, {"s": 1})
    store.save_dir(2, lambda d: (d / "rank0.bin").write_bytes(b"r0"))
    # a directory whose writer died before DONE, under a final-looking name
    half = store.root / "ckpt-000000000003.d"
    half.mkdir()
    (half / "rank0.bin").write_bytes(b"partial")
    assert [i.step for i in store.checkpoints()] == [1, 2]
    restored = store.restore()
    assert restored is not None and restored.info.step == 2
    assert restored.state == {"rank0.bin": b"r0"}


def test_sharded_shard_mismatch_falls_back(tmp_path: Path) -> None:
    store = make(tmp_path, keep_last=3)
    store.save_dir(1, lambda d: (d / "a").write_bytes(b"one"))
    store.save_dir(2, lambda d: (d / "a").write_bytes(b"two"))
    (store.root / "ckpt-000000000002.d" / "a").write_bytes(b"tw0")
    restored = store.restore(loader=lambda d: (d / "a").read_bytes())
    assert restored is not None and restored.state == b"one"


def test_failed_sharded_save_leaves_previous_intact(tmp_path: Path) -> None:
    store = make(tmp_path)
    store.save_dir(1, lambda d: (d / "a").write_bytes(b"one"))

    def boom(d: Path) -> None:
        (d / "a").write_bytes(b"half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        store.save_dir(2, boom)
    assert [i.step for i in store.checkpoints()] == [1]
    assert read_counter(tmp_path / "ctr") == 1
    assert not [p for p in store.root.iterdir() if p.name.startswith(".tmp-")]


def test_publish_dir_replaces_existing(tmp_path: Path) -> None:
    final = tmp_path / "out.d"
    with publish_dir(final) as d:
        (d / "x").write_text("1")
    with publish_dir(final, meta={"v": 2}) as d:
        (d / "x").write_text("2")
    assert (final / "x").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.d"]


def test_cleanup_temporaries(tmp_path: Path) -> None:
    store = make(tmp_path)
    (store.root / ".tmp-ckpt-000000000009.ckpt.123").write_bytes(b"half")
    (store.root / ".tmp-ckpt-000000000009.d.123").mkdir()
    assert len(store.cleanup_temporaries()) == 2
    assert list(store.root.iterdir()) == []


def test_bytes_serializer_and_serializer_mismatch(tmp_path: Path) -> None:
    raw = CheckpointStore(tmp_path / "ck", serializer=BytesSerializer(), durable=False)
    raw.save(1, b"\x00\x01")
    restored = raw.restore()
    assert restored is not None and restored.state == b"\x00\x01"
    as_json = CheckpointStore(tmp_path / "ck", durable=False)
    assert as_json.restore() is None  # refused, logged, but not quarantined
    assert [i.step for i in as_json.checkpoints()] == [1]


def test_counter_rules(tmp_path: Path) -> None:
    p = tmp_path / "c"
    assert read_counter(p) is None
    write_counter(p, 42)
    assert p.read_text() == "42\n" and read_counter(p) == 42
    for bad in ("v2 iter 10", "", "-3", "1.5", "12 13"):
        p.write_text(bad)
        with pytest.raises(CounterFormatError):
            read_counter(p)
    p.write_text("  7 \n")
    assert read_counter(p) == 7
    with pytest.raises(ValueError):
        write_counter(p, -1)


def test_atomic_write_leaves_no_temporary(tmp_path: Path) -> None:
    p = tmp_path / "f"
    write_bytes_atomic(p, b"abc")
    write_bytes_atomic(p, b"def")
    assert p.read_bytes() == b"def"
    assert os.listdir(tmp_path) == ["f"]
