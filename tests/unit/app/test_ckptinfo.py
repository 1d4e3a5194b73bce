"""chain.app.ckptinfo: how many checkpoints the adapters keep
(``CHAIN_KEEP_CHECKPOINTS``) and the DONE marker written into a directory
another writer filled."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from chain.app.ckptinfo import DEFAULT_KEEP, keep_from_env, mark_complete


@pytest.mark.parametrize(
    ("value", "kept"),
    [(None, DEFAULT_KEEP), ("", DEFAULT_KEEP), (" 5 ", 5), ("1", 1), ("0", 2), ("-3", 2), ("two", 2), ("²", 2)],
)
def test_keep_comes_from_the_runner_or_falls_back_to_two(value: str | None, kept: int) -> None:
    env = {} if value is None else {"CHAIN_KEEP_CHECKPOINTS": value}
    assert keep_from_env(env) == kept


def test_a_bad_keep_warns_once_and_never_stops_the_app(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert keep_from_env({"CHAIN_KEEP_CHECKPOINTS": "9" * 40}) == DEFAULT_KEEP
    [record] = caplog.records
    assert record.getMessage().endswith("is not a positive integer: keeping 2 checkpoints")


def test_mark_complete_lists_every_file_and_refuses_a_link(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoint-8"
    (ckpt / "sub").mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"m" * 7)
    (ckpt / "sub" / "rng.pth").write_bytes(b"r" * 3)
    mark_complete(ckpt)
    done = json.loads((ckpt / "DONE").read_text())
    assert done == {"files": {"model.safetensors": {"size": 7}, "sub/rng.pth": {"size": 3}}}
    link = tmp_path / "checkpoint-9"
    link.symlink_to(ckpt)
    (ckpt / "DONE").unlink()
    mark_complete(link)
    assert not (ckpt / "DONE").exists()
