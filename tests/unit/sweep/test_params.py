"""Parameters and points: ``--param`` text and TOML values in, typed points out."""

from __future__ import annotations

import json

import pytest

from chain.errors import ConfigError
from chain.primitives.bounded import BoundError, loads_json
from chain.sweep.params import (
    MAX_INT_DIGITS,
    MAX_POINTS,
    Point,
    grid_from_flags,
    grid_from_toml,
    identity,
    parse_param_flag,
    parse_scalar,
    points_from_toml,
    scalar_text,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-3", 0.001),
        ("3e-4", 0.0003),
        ("2", 2),
        ("-7", -7),
        ("0.5", 0.5),
        ("true", True),
        ("false", False),
        ("adam", "adam"),
        ("1.", "1."),
        ("nan", "nan"),
        ("inf", "inf"),
        ("", ""),
    ],
)
def test_a_flag_value_reads_as_toml_would(text: str, value: object) -> None:
    parsed = parse_scalar(text)
    assert parsed == value and type(parsed) is type(value)


def test_scalar_text_is_tomls_spelling() -> None:
    assert [scalar_text(v) for v in (True, 3, 0.0003, 1e-05, "a b")] == ["true", "3", "0.0003", "1e-05", "a b"]


def test_a_param_flag_has_lists_and_ranges() -> None:
    assert parse_param_flag("lr=1e-3,3e-4") == ("lr", [0.001, 0.0003])
    assert parse_param_flag("seed=0..2") == ("seed", [0, 1, 2])
    assert parse_param_flag("seed=0..1,10, -3..-2") == ("seed", [0, 1, 10, -3, -2])
    assert parse_param_flag("opt=adam,sgd") == ("opt", ["adam", "sgd"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lr", "expected NAME=VALUES"),
        ("=1", "is not a name"),
        ("1x=1", "is not a name"),
        ("a-b=1", "is not a name"),
        ("lr=1,,2", "an empty value"),
        ("lr=", "an empty value"),
        ("seed=3..1", "is empty"),
        ("seed=0..99999999", "more than 10000 values"),
        ("x=a\nb", "control character"),
        ("x=a\x1b[2Jb", "control character"),
        ("x=a\u2028b", "control character"),
        ("x=" + "a" * 2000, "a value of 2000 characters"),
        ("x=" + "9" * 40 + "..1", "more than 18 digits"),
        ("seed=1" + "0" * 18, "an integer of more than 18 digits"),
        ("seed=-" + "9" * 19, "an integer of more than 18 digits"),
        ("seed=-" + "9" * 19 + "..0", "a range bound of more than 18 digits"),
    ],
)
def test_a_bad_param_flag_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_param_flag(text)
    assert "\n" not in str(caught.value)


def test_flags_make_a_grid_first_axis_slowest() -> None:
    points = grid_from_flags(["lr=1e-3,3e-4", "seed=0..2"])
    assert [p.as_dict() for p in points] == [{"lr": 0.001, "seed": s} for s in (0, 1, 2)] + [
        {"lr": 0.0003, "seed": s} for s in (0, 1, 2)
    ]


def test_a_flag_given_twice_or_a_huge_grid_is_refused() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        grid_from_flags(["lr=1", "lr=2"])
    with pytest.raises(ConfigError, match="1000000 points"):
        grid_from_flags(["a=1..1000", "b=1..1000"])
    with pytest.raises(ConfigError, match="no parameters"):
        grid_from_flags([])


def test_names_that_differ_only_in_case_clash_in_the_environment() -> None:
    with pytest.raises(ConfigError, match="differ only in case"):
        grid_from_flags(["lr=1", "LR=2"])


def test_a_toml_grid_and_points() -> None:
    assert [p.as_dict() for p in grid_from_toml({"lr": [0.1, 0.2], "opt": "adam"}, "g")] == [
        {"lr": 0.1, "opt": "adam"},
        {"lr": 0.2, "opt": "adam"},
    ]
    points = points_from_toml([{"lr": 0.1, "seed": 1}, {"seed": 2, "lr": 0.1}], "p")
    assert points[1] == Point.of({"lr": 0.1, "seed": 2})


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ([{"lr": 0.1}, {"lr": 0.1}], "given twice"),
        ([{}], "without parameters"),
        ({"lr": 1}, "write each point as a \\[\\[point\\]\\] table"),
        ([{"lr": [1, 2]}], "a list"),
        ([{"lr": {"a": 1}}], "a table"),
        ([{"lr": float("nan")}], "not a finite number"),
        ([{"lr": 10**40}], "more than 18 digits"),
        ([{"seed": 10**18}], "more than 18 digits"),
        ([{"bad name": 1}], "is not a name"),
        ([{"x": "a\x00b"}], "control character"),
    ],
)
def test_bad_points_are_refused(tables: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        points_from_toml(tables, "p")


def test_too_many_points() -> None:
    with pytest.raises(ConfigError, match=f"at most {MAX_POINTS}"):
        points_from_toml([{"i": i} for i in range(MAX_POINTS + 1)], "p")


def test_a_points_identity_keeps_the_values_type() -> None:
    kinds = [Point.of({"x": v}) for v in (1, 1.0, True, "1")]
    assert len({identity(p) for p in kinds}) == 4
    assert Point.of({"a": 1, "b": 2}) == Point.of({"b": 2, "a": 1})


def test_every_integer_a_sweep_takes_reads_back_from_its_own_files() -> None:
    """sweep.json and each point's settings are read through the bounded JSON
    reader: an integer the sweep took and that reader refused left a sweep
    chain itself called damaged (a 22-digit value did)."""
    largest = int("9" * MAX_INT_DIGITS)
    assert parse_param_flag(f"seed={largest},-{largest}") == ("seed", [largest, -largest])
    assert loads_json(json.dumps({"seed": [largest, -largest]})) == {"seed": [largest, -largest]}
    with pytest.raises(BoundError):
        loads_json(json.dumps({"seed": largest * 10 + 9}))
    with pytest.raises(ConfigError, match="more than 18 digits"):
        parse_param_flag(f"seed={largest * 10 + 9}")
    assert parse_param_flag(f"seed=-{largest}..{-largest + 1}") == ("seed", [-largest, -largest + 1])
    # a longer run of digits reads as a string, as it always did (point names depend on it)
    assert parse_param_flag("tag=" + "1" * 31) == ("tag", ["1" * 31])
