"""Files shaped as torch.save's, written without torch (the counter tests of
store/test_counter.py and store/test_torch_counter.py)."""

from __future__ import annotations

import os
from pathlib import Path


class Runs:
    """Unpickled by pickle itself, this would run a command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


def torch_like(path: Path, data: object, name: str = "ckpt/data.pkl") -> Path:
    """A file shaped as torch.save's: a zip whose <name>/data.pkl is the pickle."""
    import pickle
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(name, pickle.dumps(data, protocol=2))
        archive.writestr("ckpt/byteorder", "little")
    return path
