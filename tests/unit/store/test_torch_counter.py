"""chain.store.torch_counter: a torch.save checkpoint's counter, a plain
integer read from the zip without torch (nothing in it unpickled that could
run), anything else by torch in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _torch_files import Runs, torch_like

from chain.store.torch_counter import plain_counter


def test_torch_not_importable_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ckpt.pt").write_bytes(b"x")
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "torch.py").write_text("raise ImportError('no torch here')\n")
    env = {**os.environ, "PYTHONPATH": str(hide)}
    proc = subprocess.run(
        [sys.executable, "-m", "chain.store.torch_counter", str(tmp_path / "ckpt.pt"), "k"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"torch is not importable by {sys.executable}: no torch here"


def test_a_plain_integer_is_read_from_the_zip_without_torch_and_runs_nothing(tmp_path: Path) -> None:
    from collections import OrderedDict

    marker = tmp_path / "pwned"
    data = {"iter_num": 40, "evil": Runs(f"touch {marker}"), "model": OrderedDict(w=Runs(f"touch {marker}"))}
    path = torch_like(tmp_path / "ckpt.pt", data)
    assert plain_counter(path, "iter_num") == 40 and not marker.exists()
    for key in ("evil", "model", "absent"):
        assert plain_counter(path, key) is None  # torch decides (and words the error)
    assert plain_counter(torch_like(tmp_path / "t.pt", {"iter_num": True}), "iter_num") is None
    assert plain_counter(torch_like(tmp_path / "n.pt", {"iter_num": -1}), "iter_num") is None
    assert plain_counter(torch_like(tmp_path / "l.pt", [40]), "iter_num") is None
    assert plain_counter(torch_like(tmp_path / "d.pt", {"iter_num": 4}, "a/b/data.pkl"), "iter_num") is None
    (tmp_path / "half.pt").write_bytes(path.read_bytes()[:-30])  # mid-write: no central directory yet
    assert plain_counter(tmp_path / "half.pt", "iter_num") is None
    assert not marker.exists()
