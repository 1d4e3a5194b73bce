"""Point names: stable, readable where the values allow, always one safe path component."""

from __future__ import annotations

import pytest

from chain.errors import ConfigError
from chain.sweep.naming import READABLE_CHARS, RESERVED_NAMES, check_dir_name, point_hash, point_name
from chain.sweep.params import Point, Scalar
from chain.sweep.store import RECORD_FILE, REPORT_DIR


def test_plain_values_give_a_readable_name_in_name_order() -> None:
    assert point_name(Point.of({"seed": 1, "lr": 0.0003})) == "lr=0.0003_seed=1"
    assert point_name(Point.of({"opt": "adam", "warm": True, "n": -2})) == "n=-2_opt=adam_warm=true"


def test_the_same_point_has_the_same_name_every_time() -> None:
    assert point_name(Point.of({"lr": 1e-3})) == point_name(Point.of({"lr": 0.001})) == "lr=0.001"


@pytest.mark.parametrize(
    "value",
    ["..", ".", "../../etc", "a/b", "/abs", "x y", "100%j", "a_b", "a=b", "-rf", "~", "", "é", "1", "true", "a" * 5000],
)
def test_a_hostile_value_gives_a_safe_name(value: str) -> None:
    name = point_name(Point.of({"x": value}))
    assert "/" not in name and "\0" not in name and " " not in name and "%" not in name
    assert name not in (".", "..") and not name.startswith((".", "-")) and name
    assert len(name.encode()) <= 255
    assert all(c.isascii() and (c.isalnum() or c in "._+-=") for c in name)


@pytest.mark.parametrize(("digits", "hashed"), [(18, True), (19, True), (30, True), (31, False)])
def test_a_string_of_digits_is_named_as_it_always_was(digits: int, hashed: bool) -> None:
    """A point's directory is found again by its name: a quoted string of
    digits that a flag would read as an integer (up to 30 digits, whatever
    integers a sweep accepts) carries a hash, a longer one reads as itself."""
    text = "1" * digits
    name = point_name(Point.of({"x": text}))
    assert name == (f"x={text}__{point_hash(Point.of({'x': text}))}" if hashed else f"x={text}")


def test_names_never_collide() -> None:
    values: list[Scalar] = ["a/b", "a-b", "a_b", "a b", "1", 1, 1.0, True, "true", "", "..", "a" * 300, "a" * 301]
    names = [point_name(Point.of({"x": v})) for v in values]
    assert len(set(names)) == len(values)
    pair = [point_name(Point.of({"a": "1_b=2"})), point_name(Point.of({"a": 1, "b": 2}))]
    assert pair[0] != pair[1] and pair[1] == "a=1_b=2"


def test_a_long_name_is_cut_with_its_hash() -> None:
    name = point_name(Point.of({"x": "a" * 500}))
    assert len(name) <= READABLE_CHARS + 14 and name.startswith("x=aaa")


@pytest.mark.parametrize("name", ["0", "17", "lr=0.001,seed=0", "+opt=adam", "a b"])
def test_a_given_directory_name_that_is_safe_is_kept(name: str) -> None:
    assert check_dir_name(name, "w") == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        ("a/b", "holds a '/'"),
        ("..", "starts with '.'"),
        (".hydra", "starts with '.'"),
        ("-rf", "starts with '.' or '-'"),
        ("100%j", "holds a '%'"),
        ("a\nb", "control character"),
        ("report", "the sweep's own files"),
        ("sweep.json", "the sweep's own files"),
        ("é" * 200, "longer than 255 bytes"),
        (3, "must be a name"),
    ],
)
def test_a_given_directory_name_that_is_unsafe_is_one_line(name: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        check_dir_name(name, "w")
    assert "\n" not in str(caught.value)


def test_the_sweeps_own_files_are_reserved() -> None:
    assert {RECORD_FILE, REPORT_DIR} <= set(RESERVED_NAMES)
