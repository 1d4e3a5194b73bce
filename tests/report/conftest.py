"""Fixtures of the report tests (literal data in _report_data.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _report_data import write_chain


@pytest.fixture
def chain_dir(tmp_path: Path) -> Path:
    path: Path = write_chain(tmp_path)
    return path
