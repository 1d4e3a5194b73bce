"""Every package of chain/ is shipped: pyproject.toml lists packages by
hand (templates/ is mapped into the package), and chain.api was once left
out, so a non-editable install failed `chain status` with an ImportError."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[3]


def test_every_package_directory_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "chain").rglob("__init__.py")}
    assert on_disk, "no packages found under chain/"
    assert on_disk - listed == set(), f"packages missing from pyproject.toml: {sorted(on_disk - listed)}"
