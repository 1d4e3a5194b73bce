"""The tree passes ruff's lint and format check with the ruff the dev extra pins
(pyproject.toml): a long line, an unused import or an unformatted file fails
here, not in a reviewer's read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_ruff_check_passes() -> None:
    proc = _ruff("check", "--output-format", "concise")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_format_check_passes() -> None:
    proc = _ruff("format", "--check")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
