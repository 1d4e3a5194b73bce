"""The library behind the CLI: submit, resume, render, status, cancel.

The CLI only adapts these calls; every user error is a ``ChainError``.
``config`` resolves settings, ``submission`` submits (new, resumed,
renewed), ``sweep_handle`` holds ``Sweep`` (a directory of chains, one per
point of a parameter grid), ``status`` builds the status report, ``cancelling`` stops a chain
(not ``cancel``: a submodule's name would shadow the function's).

Each name is imported from its module on first use (PEP 562): ``chain
status`` needs the status report, not submission's templates and jobs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chain.api.cancelling import cancel
    from chain.api.config import LimitsMemo, chain_dir_path, check_app, load_settings, stored_settings
    from chain.api.handle import Chain
    from chain.api.status import open_chain, status_report, wait_jobs_gone
    from chain.api.submission import (
        Submitted,
        archive_chain_dir,
        render,
        render_chain,
        submit,
    )
    from chain.api.sweep_handle import Sweep

_HOMES = {
    "cancel": "cancelling",
    "LimitsMemo": "config",
    "chain_dir_path": "config",
    "check_app": "config",
    "load_settings": "config",
    "stored_settings": "config",
    "Chain": "handle",
    "open_chain": "status",
    "status_report": "status",
    "wait_jobs_gone": "status",
    "Submitted": "submission",
    "archive_chain_dir": "submission",
    "render": "submission",
    "render_chain": "submission",
    "submit": "submission",
    "Sweep": "sweep_handle",
}

__all__ = [
    "Chain",
    "LimitsMemo",
    "Submitted",
    "Sweep",
    "archive_chain_dir",
    "cancel",
    "chain_dir_path",
    "check_app",
    "load_settings",
    "open_chain",
    "render",
    "render_chain",
    "status_report",
    "stored_settings",
    "submit",
    "wait_jobs_gone",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'chain.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"chain.api.{home}"), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
