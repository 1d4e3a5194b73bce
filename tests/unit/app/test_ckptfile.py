"""The single-file checkpoint format (``chain.app.ckptfile``): a magic line,
a JSON header line, the payload; a damaged file is named, never decoded."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.app.ckptfile import MAGIC, CorruptCheckpoint, encode, read_header, split

HEADER = {"step": 40, "serializer": "json", "meta": {"lr": 0.1}}


def test_a_checkpoint_splits_back_into_its_header_and_payload(tmp_path: Path) -> None:
    data = encode(HEADER, b'{"w":[1.5]}\n\x00binary')
    assert data.startswith(MAGIC)
    assert split(data, tmp_path / "ckpt-40") == (HEADER, b'{"w":[1.5]}\n\x00binary')  # newlines in it kept
    (tmp_path / "ckpt-40").write_bytes(data)
    assert read_header(tmp_path / "ckpt-40") == HEADER


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"CHAINCKPT0\n{}\n", "ckpt-7: not a chain checkpoint \\(bad magic\\)"),
        (b"", "bad magic"),
        (MAGIC + b'{"step": 7', "ckpt-7: truncated header"),
        (MAGIC + b"{step}\n", "ckpt-7: bad header"),
        (MAGIC + b"[7]\n", "ckpt-7: header is not an object"),
    ],
)
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "ckpt-7"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpoint, match=message):
        split(data, path)
    with pytest.raises(CorruptCheckpoint, match=message):
        read_header(path)
