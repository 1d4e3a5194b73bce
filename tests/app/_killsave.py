"""Run a training script and SIGKILL it in the middle of a save, at a chosen byte.

Usage: python _killsave.py SCRIPT [ARGS...]

``FAULT_KILL_FILE`` (a file name, e.g. ``state.pt`` or ``optimizer.pt``),
``FAULT_KILL_SAVE`` (which save of that file, 1-based) and ``FAULT_KILL_BYTE``
(how many bytes of it reach the disk): ``torch.save`` of that file writes
its first bytes, fsyncs them, prints ``killed <file> <bytes>`` and the
process SIGKILLs itself, as a node loss or an OOM kill would land in a save.
Without them the script runs unchanged. Every other ``torch.save`` is the real one.
"""

from __future__ import annotations

import io
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any

import torch

_real_save = torch.save


def install(name: str, nth: int, at_byte: int) -> None:
    seen = [0]

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(f, (str, os.PathLike)) or Path(f).name != name:
            _real_save(obj, f, *args, **kwargs)
            return
        seen[0] += 1
        if seen[0] != nth:
            _real_save(obj, f, *args, **kwargs)
            return
        buf = io.BytesIO()
        _real_save(obj, buf, *args, **kwargs)
        data = buf.getvalue()
        with open(f, "wb") as fh:
            fh.write(data[: min(at_byte, len(data) - 1)])
            fh.flush()
            os.fsync(fh.fileno())
        print(f"killed {name} {min(at_byte, len(data) - 1)} of {len(data)}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    torch.save = save


def main() -> None:
    name = os.environ.get("FAULT_KILL_FILE")
    if name:
        install(name, int(os.environ["FAULT_KILL_SAVE"]), int(os.environ["FAULT_KILL_BYTE"]))
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
