"""The integer at KEY of the ``torch.save`` dict in PATH (``--counter-cmd
torch:PATH:KEY``), two ways:

- ``plain_counter``, in the reading process and without torch: a ``torch.save``
  file is a zip whose ``data.pkl`` is a pickle; it is read by an unpickler
  that imports and calls nothing (every class or function it names, torch's
  tensor rebuilders included, becomes an inert stand-in, every tensor's
  storage too), and the value is taken when it is a plain non-negative
  integer (nanoGPT's ``iter_num``). Milliseconds, where importing torch
  takes a second or more, at every read of a handoff.
- ``python -m chain.store.torch_counter PATH KEY``, for anything else (a
  one-element tensor, the legacy non-zip format, a file mid-write, a key
  that is not there): run by ``chain.store.counter`` in a subprocess, so the
  runner and ``chain`` itself never import torch. The file is memory-mapped
  and loaded with ``weights_only=True`` (no code from the checkpoint runs).
  Exit 0 and the integer; ``NO_CHECKPOINT_EXIT`` when the file is not there;
  2 and one line on stderr otherwise.
"""

from __future__ import annotations

import collections
import pickle
import sys
import zipfile
from pathlib import Path
from typing import Any

from chain.core.counterspec import as_counter
from chain.primitives.codes import NO_CHECKPOINT_EXIT

PICKLE_CAP = 64 << 20  # a data.pkl larger than this is left to torch (it holds data, not a counter)


class _Inert:
    """What the checkpoint names beside plain data (a tensor, a storage, an
    object of some class): built from nothing it is given, never called."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


class _InertUnpickler(pickle.Unpickler):
    """Imports nothing: plain data comes out as itself, anything else inert."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):  # a state_dict: plain data
            return collections.OrderedDict
        return _Inert

    def persistent_load(self, pid: Any) -> Any:
        return _Inert()


def plain_counter(path: Path, key: str) -> int | None:
    """The integer at ``key`` of the dict ``torch.save`` wrote to ``path``,
    read without torch; None when that cannot tell (not a zip, mid-write,
    not a dict, no such key, a value that is not a plain non-negative
    integer): then torch must (``main``, in a subprocess)."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [i for i in archive.infolist() if i.filename.endswith("/data.pkl") and i.filename.count("/") == 1]
            if len(pickles) != 1 or pickles[0].file_size > PICKLE_CAP:
                return None
            with archive.open(pickles[0]) as fh:
                data = _InertUnpickler(fh).load()
    except Exception:  # noqa: BLE001 - whatever this reader cannot read, torch is asked
        return None
    value = data.get(key) if isinstance(data, dict) else None
    return as_counter(value) if isinstance(value, int) else None


def counter_of(value: object) -> int | None:
    """The counter from a dict's value: an integer, or a one-element tensor
    holding one (``.item()``)."""
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and callable(numel):
        if numel() != 1:
            return None
        value = item()
    return as_counter(value)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m chain.store.torch_counter PATH KEY", file=sys.stderr)
        return 2
    path, key = argv
    try:
        import torch
    except ImportError as exc:
        print(f"torch is not importable by {sys.executable}: {exc}", file=sys.stderr)
        return 2
    try:
        data = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except FileNotFoundError:
        return NO_CHECKPOINT_EXIT
    except Exception as exc:  # noqa: BLE001 - any load failure is this reader's one-line error
        print(
            f"cannot load {path}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
            file=sys.stderr,
        )
        return 2
    if not isinstance(data, dict) or key not in data:
        print(f"{path} has no key {key!r}" + ("" if isinstance(data, dict) else " (not a dict)"), file=sys.stderr)
        return 2
    counter = counter_of(data[key])
    if counter is None:
        print(f"key {key!r} of {path} is {str(data[key])[:40]!r}, not a non-negative integer", file=sys.stderr)
        return 2
    print(counter)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
