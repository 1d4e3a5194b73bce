"""chain.primitives.bounded: integers by their digits, JSON by its depth
and its numbers (issue 38)."""

from __future__ import annotations

import json

import pytest

from chain.primitives.bounded import MAX_DEPTH, BoundError, check_depth, loads_json, parse_int

HUGE = "1" * 5000  # past Python's int() limit of 4300 digits
DEEP_JSON = "[" * 100_000 + "]" * 100_000  # past the interpreter's recursion limit

pytestmark = pytest.mark.timeout(60)


def test_parse_int_bounds_the_digits_not_python() -> None:
    assert parse_int(" 42 ") == 42 and parse_int("-7") == -7 and parse_int("0" * 5000 + "12") == 12
    with pytest.raises(BoundError, match="a number of 5000 digits"):
        parse_int(HUGE)
    for bad in ("", "1.5", "1e3", "0x10", "--1"):
        with pytest.raises(ValueError, match="not an integer"):
            parse_int(bad)


@pytest.mark.parametrize(
    "text, problem",
    [
        (HUGE, "a number of 5000 digits"),
        ('{"a": 1e400}', "a number out of range (1e400)"),
        ('{"a": NaN}', "NaN, not a number"),
        ('{"a": -Infinity}', "-Infinity, not a number"),
        (DEEP_JSON, f"nested more than {MAX_DEPTH} deep"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} deep"),
    ],
)
def test_json_past_a_bound_is_refused_in_words(text: str, problem: str) -> None:
    with pytest.raises(BoundError) as caught:
        loads_json(text)
    assert str(caught.value) == problem


def test_json_within_the_bounds_reads_as_json() -> None:
    text = json.dumps({"a": [1, 2.5, {"b": None}], "t": 1.7e9, "n": 10**17})
    assert loads_json(text) == json.loads(text)
    check_depth(json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH))
