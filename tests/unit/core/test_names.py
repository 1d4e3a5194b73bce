"""The chain's job names (``chain.core.names``): the numbers read back from
them are ASCII digits, bounded; anything else is no number, never an error."""

from __future__ import annotations

import pytest

from chain.core.names import runner_job_name, runner_seq, submitter_cycle, submitter_job_name


def test_names_read_back() -> None:
    assert runner_seq(runner_job_name("demo-abc123", 12)) == 12
    assert submitter_cycle(submitter_job_name("demo-abc123", 3)) == 3


@pytest.mark.parametrize("tail", ["", "x", "²", "٣", "1 ", "9" * 5000, "-1"])
def test_a_name_whose_number_is_not_plain_digits_has_none(tail: str) -> None:
    assert runner_seq(f"demo.r{tail}") is None
    assert submitter_cycle(f"demo.s{tail}") is None


def test_runner_seq_from_job_name() -> None:
    assert runner_seq("chain-abc.r12") == 12
    assert runner_seq("chain-abc.s3") is None
    assert runner_seq("") is None
