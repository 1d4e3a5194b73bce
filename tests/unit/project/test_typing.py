"""The package and its tests type-check under mypy --strict:
a change that loosens a type fails here, not in a user's run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _mypy(paths: list[str], mypy_path: str, cache: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--explicit-package-bases", "--cache-dir", str(cache), *paths],
        cwd=REPO,
        env={**os.environ, "MYPYPATH": mypy_path},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


def test_mypy_strict_on_chain_its_hydra_plugin_the_tests_and_the_fault_suite(tmp_path: Path) -> None:
    """Two runs, one cache: the second reuses what the first learnt of chain,
    torch and the standard library (the fault suite alone took 100 s more).
    The fault suite's modules import each other by bare name (the driver also
    runs as a script): with their directories on mypy's path those imports are
    typed, not Any (a fault family subclasses the suite's base)."""
    tests = ["tests/" + d for d in ("unit", "e2e", "report", "backends", "app")] + ["tests/fakes.py"]
    _mypy(["chain", "hydra_plugins", *tests], "tests", tmp_path)
    _mypy(["tests/faults"], "tests/faults:tests/e2e:tests", tmp_path)
