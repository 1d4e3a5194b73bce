"""The ``glob:`` reader counts only complete checkpoints: a save cut short
(its format's marker missing) never moves the counter, and whatever the
pattern matches (a FIFO, a link loop, a set-aside copy) neither hangs nor
counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from chain.app.atomic import publish_dir
from chain.app.ckptinfo import mark_complete
from chain.core.resolution import resolve
from chain.core.settings import Settings
from chain.store.counter import CounterReading, known_counter, read_counter_state


def _settings(spec: str) -> Settings:
    return resolve({"app_cmd": "python3 train.py", "counter_cmd": spec}, {}, {})


def _hf(out: Path, step: int, *, state: bool = True) -> Path:
    path = out / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"w" * 64)
    if state:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def test_a_trainer_checkpoint_without_its_state_is_not_counted(tmp_path: Path) -> None:
    s = _settings("glob:out/checkpoint-*")
    _hf(tmp_path / "out", 10)
    cut = _hf(tmp_path / "out", 20, state=False)  # killed before the Trainer wrote trainer_state.json
    assert read_counter_state(s, tmp_path) == CounterReading(10, True, tmp_path / "out/checkpoint-10")
    assert known_counter(3, tmp_path, counter_cmd=s.counter_cmd, ckpt_path="") == 10
    (cut / "trainer_state.json").write_text("{}")
    assert read_counter_state(s, tmp_path).value == 20


def test_once_checkpoints_carry_done_one_without_it_is_cut_short(tmp_path: Path) -> None:
    s = _settings("glob:out/checkpoint-*")
    mark_complete(_hf(tmp_path / "out", 10))
    _hf(tmp_path / "out", 20)  # the Trainer finished, the callback's on_save (DONE, then the counter) did not run
    assert read_counter_state(s, tmp_path).value == 10
    mark_complete(tmp_path / "out/checkpoint-20")
    assert read_counter_state(s, tmp_path).value == 20
    done = json.loads((tmp_path / "out/checkpoint-20/DONE").read_text())
    assert done == {"files": {"model.safetensors": {"size": 64}, "trainer_state.json": {"size": 19}}}


def test_chain_app_directories_count_with_their_done_marker_only(tmp_path: Path) -> None:
    s = _settings("glob:ck/ckpt-*")
    (tmp_path / "ck").mkdir()
    with publish_dir(tmp_path / "ck/ckpt-000000000010.d") as scratch:
        (scratch / "state.pt").write_bytes(b"x" * 10)
    (tmp_path / "ck/ckpt-000000000020.d").mkdir()  # shards, no DONE
    (tmp_path / "ck/ckpt-000000000020.d/state.pt").write_bytes(b"half")
    assert read_counter_state(s, tmp_path).value == 10


def test_hostile_matches_neither_hang_nor_count(tmp_path: Path) -> None:
    s = _settings("glob:out/*")
    out = tmp_path / "out"
    _hf(out, 10)
    os.mkfifo(out / "step-90")
    (out / "step-80").symlink_to(out / "step-80")  # a link loop
    (out / "checkpoint-70").mkdir()
    os.mkfifo(out / "checkpoint-70/trainer_state.json")  # the marker is a FIFO: not a file
    (out / "chain-set-aside").mkdir()
    _hf(out / "chain-set-aside", 60)  # what a resume set aside is never counted again
    assert read_counter_state(s, tmp_path).value == 10
    nested = _settings("glob:out/*/checkpoint-*")
    assert read_counter_state(nested, tmp_path) == CounterReading(0, False, None)


def test_a_plain_file_per_checkpoint_still_counts(tmp_path: Path) -> None:
    (tmp_path / "ck").mkdir()
    for n in (3, 7):
        (tmp_path / "ck" / f"model-{n}.pt").write_bytes(b"x")
    assert read_counter_state(_settings("glob:ck/model-*.pt"), tmp_path).value == 7
