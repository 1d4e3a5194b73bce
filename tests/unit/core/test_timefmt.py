from typing import Any

import pytest

from chain.core.timefmt import format_duration, format_sbatch_time, parse_slurm_time, sbatch_minutes
from chain.errors import ConfigError


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("5", 300),  # minutes
        ("3:30", 210),  # minutes:seconds
        ("00:03:00", 180),  # hours:minutes:seconds
        ("1-2", 93600),  # days-hours
        ("1-2:3", 93780),  # days-hours:minutes
        ("1-02:03:04", 93784),  # days-hours:minutes:seconds
        (" 0:30 ", 30),
        ("24:00:00", 86400),
    ],
)
def test_six_slurm_formats(text: Any, seconds: Any) -> None:
    assert parse_slurm_time(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1:2:3:4", "-5", "0", "0:00", "1-", "UNLIMITED", "1.5", "1--2", "9" * 5000, "1-" + "9" * 5000, "٣"],
)
def test_bad_times_are_config_errors(text: Any) -> None:
    with pytest.raises(ConfigError):
        parse_slurm_time(text, what="runner time")


@pytest.mark.parametrize(
    "seconds, minutes, text",
    [(30, 1, "00:01:00"), (60, 1, "00:01:00"), (61, 2, "00:02:00"), (86400 + 90, 1442, "1-00:02:00")],
)
def test_sbatch_time_rounds_up_to_minutes(seconds: Any, minutes: Any, text: Any) -> None:
    assert sbatch_minutes(seconds) == minutes
    assert format_sbatch_time(seconds) == text
    assert parse_slurm_time(text) >= seconds


def test_format_duration() -> None:
    assert format_duration(None) == "-"
    assert format_duration(42) == "42s"
    assert format_duration(185) == "3m05s"
    assert format_duration(3720) == "1h02m"


def test_leading_zeros_are_still_a_time() -> None:
    assert parse_slurm_time("0" * 50 + "90") == 5400
