"""``python -m chain.store.torch_counter PATH KEY``: print the integer at KEY
of the ``torch.save`` dict in PATH (``--counter-cmd torch:PATH:KEY``).

Run by ``chain.store.counter`` in a subprocess, so the runner and ``chain``
itself never import torch. The file is memory-mapped and loaded with
``weights_only=True`` (no code from the checkpoint runs). Exit 0 and the
integer; ``NO_CHECKPOINT_EXIT`` when the file is not there; 2 and one line
on stderr otherwise.
"""

from __future__ import annotations

import sys

from chain.core.counterspec import as_counter
from chain.primitives.codes import NO_CHECKPOINT_EXIT


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
