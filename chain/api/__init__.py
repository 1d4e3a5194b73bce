"""The library behind the CLI: submit, resume, render, status, cancel.

The CLI only adapts these calls; every user error is a ``ChainError``.
``config`` resolves settings, ``submission`` submits (new, resumed,
renewed), ``status`` builds the status report, ``cancel`` stops a chain.
"""

from chain.api.cancel import cancel
from chain.api.config import chain_dir_path, check_app, load_settings, stored_settings
from chain.api.handle import Chain
from chain.api.status import open_chain, status_report
from chain.api.submission import (
    FINISHING_WAIT,
    Submitted,
    archive_chain_dir,
    refuse_live_submitter,
    render,
    render_chain,
    submit,
)

__all__ = [
    "Chain",
    "FINISHING_WAIT", "Submitted", "archive_chain_dir", "cancel", "known_submitters", "chain_dir_path", "check_app", "load_settings",
    "open_chain", "refuse_live_submitter", "render", "render_chain", "status_report", "stored_settings", "submit",
]
