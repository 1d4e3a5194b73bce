"""Real chains, end to end, on both backends: the local one (no Slurm) and
the dev cluster's Slurm. Helpers live in e2e_helpers.py."""

from __future__ import annotations

import pytest

BACKENDS = [pytest.param("local", marks=pytest.mark.local), pytest.param("slurm", marks=pytest.mark.slurm)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "slurm":
        request.getfixturevalue("slurm_cluster")
    return str(request.param)
