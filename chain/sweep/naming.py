"""A point's directory name, from its parameters alone. Pure.

``lr=0.0003_seed=1``: the parameters in name order, ``name=value`` joined by
``_``. The same point has the same name in every run (its directory is found
again by ``resume`` and ``add``). Values are the user's text: one holding
anything but letters, digits, ``.``, ``+`` and ``-`` (a ``/``, ``..`` as
part of the name is harmless, a space, ``%`` that Slurm expands in output
paths, ``_`` and ``=`` that separate the parts), a string that reads as a
number or a boolean, or a name past ``READABLE_CHARS``, is shown with those
characters replaced and cut, and ends with ``__`` and a hash of the point:
two points never share a name, and a name is never ``.``, ``..``, empty,
hidden, an option, or too long for a file system.

A point may instead be given its directory's name (a Hydra multirun's job
directory, ``hydra.sweep.subdir``): ``check_dir_name`` holds it to the same
safety, one path component, and never one of the sweep's own files.
"""

from __future__ import annotations

import hashlib
import json
import re

from chain.errors import ConfigError
from chain.sweep.params import Point, parse_scalar, scalar_text, shown

READABLE_CHARS = 120  # of a name before its hash: well under the 255 bytes of a file name
HASH_CHARS = 12
_PLAIN = re.compile(r"[A-Za-z0-9.+-]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]")
# a given name's characters refused: "/" (one component), "%" (Slurm's filename patterns:
# the rendered --output escapes it, but a given name with one is more likely a typo),
# "\\" (sbatch's --output cannot carry it) and control characters
_REFUSED = re.compile(r"[/%\\\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_DIR_BYTES = 255  # a file name's limit on common file systems
RESERVED_NAMES = ("sweep.json", "report")  # the sweep's own files (chain.sweep.store)


def point_name(point: Point) -> str:
    """The point's directory name (a single safe path component)."""
    parts = [f"{name}={scalar_text(value)}" for name, value in point.params]
    readable = "_".join(parts)
    if all(_faithful(value) for _, value in point.params) and len(readable) <= READABLE_CHARS:
        return readable
    shown = "_".join(f"{name}={_UNSAFE.sub('-', scalar_text(value))}" for name, value in point.params)
    return f"{shown[:READABLE_CHARS]}__{point_hash(point)}"


def point_hash(point: Point) -> str:
    """A short hash of the point's names, values and their types."""
    text = json.dumps([[name, type(value).__name__, value] for name, value in point.params], ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def _faithful(value: object) -> bool:
    """The value's text alone says which value it is, in safe characters."""
    if not isinstance(value, str):
        return True
    if not _PLAIN.fullmatch(value):
        return False
    read = parse_scalar(value)
    return isinstance(read, str) and read == value


def check_dir_name(name: object, where: str) -> str:
    """A point's directory name given rather than derived: one path component
    that is not hidden, not an option, not one of the sweep's own files, with
    no ``%`` or control character; else a one-line ``ConfigError``."""
    if not isinstance(name, str):
        raise ConfigError(f"{where}: a point's directory must be a name, got {name!r:.40}")
    problems = [
        (not name, "is empty"),
        ("/" in name, "holds a '/' (each point's directory is directly in the sweep's)"),
        (bool(_REFUSED.search(name)), "holds a '%', a backslash or a control character"),
        (name.startswith((".", "-")), "starts with '.' or '-'"),
        (name in RESERVED_NAMES, "is one of the sweep's own files"),
        (len(name.encode()) > MAX_DIR_BYTES, f"is longer than {MAX_DIR_BYTES} bytes"),
    ]
    for found, problem in problems:
        if found:
            raise ConfigError(f"{where}: the point directory {shown(name)} {problem}")
    return name
