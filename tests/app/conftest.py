"""Fixtures for the app-side helper tests: pure, no Slurm."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HELPERS = REPO / "chain" / "shell"


def child_env(podinfo: Path | None = None, /, **extra: str) -> dict[str, str]:
    """Environment for a child process that imports this checkout's chain."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHAIN_", "SLURM_"))}
    env.pop("CKPT_PATH", None)
    env.pop("MAX_ITER", None)
    env.pop("CHECKPOINT_EVERY", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    # Never read the real /etc/podinfo of the machine running the tests.
    env["CHAIN_PODINFO"] = str(podinfo or "/nonexistent-podinfo")
    env.update(extra)
    return env


@pytest.fixture
def podinfo(tmp_path: Path) -> Path:
    """An empty downward-API directory with the four files, all empty."""
    d = tmp_path / "podinfo"
    d.mkdir()
    for name in (
        "guaranteed-until",
        "termination-warning-at",
        "termination-warning-risk",
        "termination-warning-message",
    ):
        (d / name).write_text("")
    return d


PYTHON = sys.executable
