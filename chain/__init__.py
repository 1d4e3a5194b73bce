"""chain: run a long sequential computation on Slurm as a self-driving
chain of checkpointed jobs.

``from chain import Chain`` is the Python API (``chain.api.handle``; ``Sweep``,
``chain.api.sweep_handle``, for a sweep of chains); it is
imported on first use, so ``chain --help`` does not pay for it. The error
family (``ChainError`` and its subclasses, ``chain.errors``) is imported
here: it imports only its exit codes (``chain.primitives.codes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chain.errors import (
    BackendUnavailable,
    ChainDirError,
    ChainError,
    CheckpointError,
    ConfigError,
    ProtocolError,
    SchedulerError,
)

if TYPE_CHECKING:
    from chain.api.handle import Chain
    from chain.api.sweep_handle import Sweep

__version__ = "0.2.0"
__all__ = [
    "BackendUnavailable",
    "Chain",
    "ChainDirError",
    "ChainError",
    "CheckpointError",
    "ConfigError",
    "ProtocolError",
    "SchedulerError",
    "Sweep",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name == "Chain":
        from chain.api.handle import Chain

        return Chain
    if name == "Sweep":
        from chain.api.sweep_handle import Sweep

        return Sweep
    raise AttributeError(f"module 'chain' has no attribute {name!r}")
