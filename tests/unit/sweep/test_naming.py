"""Point names: stable, readable where the values allow, always one safe path component."""

from __future__ import annotations

import pytest

from chain.sweep.naming import READABLE_CHARS, point_name
from chain.sweep.params import Point, Scalar


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


def test_names_never_collide() -> None:
    values: list[Scalar] = ["a/b", "a-b", "a_b", "a b", "1", 1, 1.0, True, "true", "", "..", "a" * 300, "a" * 301]
    names = [point_name(Point.of({"x": v})) for v in values]
    assert len(set(names)) == len(values)
    pair = [point_name(Point.of({"a": "1_b=2"})), point_name(Point.of({"a": 1, "b": 2}))]
    assert pair[0] != pair[1] and pair[1] == "a=1_b=2"


def test_a_long_name_is_cut_with_its_hash() -> None:
    name = point_name(Point.of({"x": "a" * 500}))
    assert len(name) <= READABLE_CHARS + 14 and name.startswith("x=aaa")
