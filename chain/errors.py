"""The ChainError family: every error a user should see as one line.

The CLI maps each class to an exit code in one place (``chain.cli.commands``);
anything else escaping is a bug.
"""

from __future__ import annotations

from chain.primitives.codes import CliExit


class ChainError(Exception):
    """Base of all errors shown to the user as a one-line message."""

    exit_code: int = CliExit.ERROR


class ConfigError(ChainError):
    """Bad settings: flag, environment, config file, template."""

    exit_code: int = CliExit.USAGE


class ChainDirError(ChainError):
    """The chain directory is unusable, busy, or holds a corrupt state file."""

    exit_code: int = CliExit.USAGE


class CheckpointError(ChainError):
    """The progress counter (CKPT_PATH) cannot be read as a plain integer."""

    exit_code: int = CliExit.CHECKPOINT


class SchedulerError(ChainError):
    """The scheduler refused or failed a request (after retries)."""

    exit_code: int = CliExit.SCHEDULER


class BackendUnavailable(SchedulerError):
    """The requested backend cannot be used on this machine."""

    exit_code: int = CliExit.USAGE
