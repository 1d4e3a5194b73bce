"""The ChainError family: every error a user should see as one line.

Each class carries its exit code from the one table (``CliExit`` in
``chain.primitives.codes``); the CLI's one handler (``chain.cli.group``)
exits with it. Anything else escaping is a bug.
"""

from __future__ import annotations

from chain.primitives.codes import CliExit


class ChainError(Exception):
    """Base of all errors shown to the user as a one-line message."""

    exit_code: int = int(CliExit.ERROR)


class ConfigError(ChainError):
    """Bad settings: flag, environment, config file, template."""

    exit_code: int = int(CliExit.USAGE)


class ChainDirError(ChainError):
    """The chain directory is unusable, busy, or holds a corrupt state file."""

    exit_code: int = int(CliExit.USAGE)


class CheckpointError(ChainError):
    """The progress counter (CKPT_PATH) cannot be read as a plain integer."""

    exit_code: int = int(CliExit.CHECKPOINT)


class SchedulerError(ChainError):
    """The scheduler refused or failed a request (after retries)."""

    exit_code: int = int(CliExit.SCHEDULER)


class BackendUnavailable(SchedulerError):
    """The requested backend cannot be used on this machine."""

    exit_code: int = int(CliExit.USAGE)


class ProtocolError(ChainError):
    """An event the chain's state does not allow (``chain.core.protocol``):
    refused, nothing applied. A job or command acting on a chain that moved
    on without it (ended meanwhile), or a bug."""

    exit_code: int = int(CliExit.ERROR)

    def __init__(self, chain_id: str, event: str, why: str) -> None:
        super().__init__(f"chain {chain_id}: {event} refused: {why}")
        self.event = event


def error_line(exc: ChainError) -> str:
    """The one line a command or a job prints for a user's error."""
    return f"chain: error: {exc}"


def bug_line(exc: BaseException) -> str:
    """The one line printed for a fault in chain (``CliExit.BUG``)."""
    return f"chain: internal error: {type(exc).__name__}: {exc} (CHAIN_DEBUG=1 shows the traceback)"
