"""A sweep file, and where a sweep's points come from. Pure.

A sweep file is a ``chain.toml`` (the settings every point shares, by their
TOML names) with the points besides: a ``[grid]`` table (each key a
parameter, its value a list: every combination is a point) or ``[[point]]``
tables (each one point). ``--param NAME=VALUES`` flags give a grid instead;
a sweep's points come from one of the three::

    app_cmd = "python3 ../train.py --lr {lr} --seed {seed}"
    max_iter = 100
    runner_time = "1:00:00"

    [grid]
    lr = [1e-3, 3e-4]
    seed = [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tomllib

from chain.core.fields import FIELD_BY_NAME
from chain.errors import ConfigError
from chain.primitives import bounded
from chain.sweep.params import Point, grid_from_flags, grid_from_toml, points_from_toml

GRID_KEY = "grid"
POINTS_KEY = "point"


@dataclass(frozen=True)
class SweepSpec:
    """A sweep file's content: its settings (TOML names, not yet validated:
    they are one layer of the settings) and its points (none: the flags give them)."""

    settings: dict[str, Any] = field(default_factory=dict)
    points: tuple[Point, ...] = ()


def parse_sweep_text(text: str, label: str) -> SweepSpec:
    """The sweep file ``label`` holding ``text``."""
    try:
        data = tomllib.loads(text)
        bounded.check_depth(data)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"sweep file {label}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"sweep file {label}: nested more than {bounded.MAX_DEPTH} deep") from None
    except ValueError as exc:  # bounded's, or an integer past Python's digits
        raise ConfigError(f"sweep file {label}: {exc}") from None
    return parse_sweep_data(data, label)


def parse_sweep_data(data: Mapping[str, Any], label: str) -> SweepSpec:
    """A sweep file's TOML data: settings, then ``[grid]`` or ``[[point]]``."""
    where = f"sweep file {label}"
    settings = {k: v for k, v in data.items() if k not in (GRID_KEY, POINTS_KEY)}
    unknown = sorted(set(settings) - set(FIELD_BY_NAME))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (a chain setting, [grid] or [[point]])")
    if GRID_KEY in data and POINTS_KEY in data:
        raise ConfigError(f"{where}: give the points as [grid] or as [[point]] tables, not both")
    if GRID_KEY in data:
        grid = data[GRID_KEY]
        if not isinstance(grid, Mapping):
            raise ConfigError(f"{where}: grid must be a table ([grid], one key per parameter)")
        return SweepSpec(settings, tuple(grid_from_toml(grid, f"{where}: [grid]")))
    if POINTS_KEY in data:
        return SweepSpec(settings, tuple(points_from_toml(data[POINTS_KEY], f"{where}: [[point]]")))
    return SweepSpec(settings)


def sweep_points(spec: SweepSpec | None, param_flags: Sequence[str]) -> list[Point]:
    """The sweep's points: the file's or the ``--param`` flags', never both, at least one."""
    file_points = list(spec.points) if spec else []
    if file_points and param_flags:
        raise ConfigError("the sweep file has its points: give --param only with a file without [grid] or [[point]]")
    if file_points:
        return file_points
    if not param_flags:
        raise ConfigError("no points: give a sweep file with [grid] or [[point]] tables, or --param NAME=VALUES")
    return grid_from_flags(param_flags)
