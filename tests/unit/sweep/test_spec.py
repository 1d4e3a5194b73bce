"""Sweep files: settings and a grid or points; where a sweep's points come from."""

from __future__ import annotations

import pytest

from chain.errors import ConfigError
from chain.sweep.params import Point
from chain.sweep.spec import SweepSpec, parse_sweep_text, sweep_points

FILE = """
app_cmd = "python3 ../app.py --lr {lr}"
max_iter = 20

[grid]
lr = [1e-3, 3e-4]
seed = [0, 1]
"""


def test_a_grid_file() -> None:
    spec = parse_sweep_text(FILE, "s.toml")
    assert spec.settings == {"app_cmd": "python3 ../app.py --lr {lr}", "max_iter": 20}
    assert len(spec.points) == 4 and spec.points[0] == Point.of({"lr": 0.001, "seed": 0})


def test_a_points_file() -> None:
    spec = parse_sweep_text('app_cmd = "x"\n[[point]]\nlr = 0.1\n[[point]]\nlr = 0.2\nwarm = true\n', "s")
    assert [p.as_dict() for p in spec.points] == [{"lr": 0.1}, {"lr": 0.2, "warm": True}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_iters = 3", "unknown key 'max_iters'"),
        ("[grid]\na = [1]\n[[point]]\na = 1", "not both"),
        ("grid = 3", "grid must be a table"),
        ("point = 3", "write each point"),
        ("a = [", "sweep file s:"),
        ("x = " + "[" * 300 + "]" * 300, "sweep file s:"),
    ],
)
def test_a_bad_file_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_sweep_text(text, "s")
    assert "\n" not in str(caught.value)


def test_points_come_from_the_file_or_the_flags() -> None:
    with_points = parse_sweep_text(FILE, "s")
    assert len(sweep_points(with_points, [])) == 4
    assert len(sweep_points(SweepSpec({"max_iter": 3}), ["a=1..3"])) == 3
    assert len(sweep_points(None, ["a=1,2"])) == 2
    with pytest.raises(ConfigError, match="the sweep file has its points"):
        sweep_points(with_points, ["a=1"])
    with pytest.raises(ConfigError, match="no points"):
        sweep_points(SweepSpec(), [])
