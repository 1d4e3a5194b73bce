"""The error family (``chain.errors``): each class its exit code from the one
table, and a refused protocol event's message naming the chain, the event
and why."""

from __future__ import annotations

import pytest

from chain import errors
from chain.primitives.codes import CliExit


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (errors.ChainError, CliExit.ERROR),
        (errors.ConfigError, CliExit.USAGE),
        (errors.ChainDirError, CliExit.USAGE),
        (errors.CheckpointError, CliExit.CHECKPOINT),
        (errors.SchedulerError, CliExit.SCHEDULER),
        (errors.BackendUnavailable, CliExit.USAGE),  # a scheduler error the user fixes with a flag
        (errors.ProtocolError, CliExit.ERROR),
    ],
)
def test_each_error_exits_with_its_code_from_the_table(cls: type[errors.ChainError], code: CliExit) -> None:
    assert cls.exit_code == int(code) and issubclass(cls, errors.ChainError)


def test_a_missing_backend_is_caught_as_a_scheduler_error() -> None:
    with pytest.raises(errors.SchedulerError):
        raise errors.BackendUnavailable("no Slurm controller answers")


def test_a_refused_event_names_the_chain_the_event_and_why() -> None:
    refused = errors.ProtocolError("demo-abc123", "SubmitterStarted", "the chain is cancelled")
    assert str(refused) == "chain demo-abc123: SubmitterStarted refused: the chain is cancelled"
    assert refused.event == "SubmitterStarted"
