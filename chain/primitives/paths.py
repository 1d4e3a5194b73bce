"""Where chain's files for the app live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["RANK_PROGRESS", "shell_helpers_dir"]

# In a launched run's ranks folder ($CHAIN_RANKS_DIR), beside the rank wrapper's rank-N.json: the
# step rank N stopped at and whether its checkpoint was committed, as chain.app's adapter noted them
RANK_PROGRESS = "progress-{rank}.json"


def shell_helpers_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``chain.sh`` and ``chain.R`` live: ``$CHAIN_SHELL_HELPERS`` when
    set, else the ``shell`` directory shipped inside the ``chain`` package."""
    env = os.environ if environ is None else environ
    given = env.get("CHAIN_SHELL_HELPERS")
    if given:
        return Path(given)
    return Path(__file__).resolve().parent.parent / "shell"
