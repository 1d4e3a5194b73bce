"""The package and its tests type-check under mypy --strict (the issue-14
rule): a change that loosens a type fails here, not in a user's run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_mypy_strict_on_chain_and_tests(tmp_path: Path) -> None:
    tests = ["tests/" + d for d in ("unit", "e2e", "faults", "report", "backends", "app")] + ["tests/fakes.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--explicit-package-bases", "--cache-dir", str(tmp_path),
         "chain", *tests],
        cwd=REPO, env={**os.environ, "MYPYPATH": "tests"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
