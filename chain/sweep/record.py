"""``sweep.json``: a sweep's own record. Pure (``chain.sweep.store`` reads and writes it).

It holds the settings every point shares (validated, as a chain's
``settings.json``; ``app_cmd`` with its placeholders) and the points in
the order they were added. A point's directory name is derived from its
parameters again on every read, never taken from the file: an edited
record cannot send a command outside the sweep's directory. A point made
with its directory given (``PointEntry.named``: a Hydra multirun's job
directory) keeps it as ``"dir"``, checked again on every read
(``chain.sweep.naming.check_dir_name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chain.core.resolution import from_json
from chain.core.settings import Settings
from chain.errors import ConfigError
from chain.sweep.command import check_template
from chain.sweep.naming import check_dir_name, point_name
from chain.sweep.params import MAX_POINTS, Point, check_name, check_value, checked_points

RECORD_VERSION = 1


@dataclass(frozen=True)
class PointEntry:
    """A point and its directory's name."""

    name: str
    point: Point
    given: bool = False  # the name was given (PointEntry.named), not derived from the parameters

    @classmethod
    def of(cls, point: Point) -> PointEntry:
        return cls(point_name(point), point)

    @classmethod
    def named(cls, name: str, point: Point) -> PointEntry:
        """The point in the directory ``name`` (checked: one safe path component)."""
        return cls(check_dir_name(name, "sweep"), point, given=True)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "params": self.point.as_dict()}
        if self.given:
            data["dir"] = self.name
        return data


@dataclass(frozen=True)
class SweepRecord:
    """What a sweep is: its shared settings and its points."""

    settings: Settings
    points: tuple[PointEntry, ...]
    created: float

    @classmethod
    def new(cls, settings: Settings, points: Sequence[Point], created: float) -> SweepRecord:
        """A sweep of ``points``, checked against the settings' app command."""
        record = cls(settings, (), created)
        return record.with_points(points)

    def with_points(self, points: Sequence[Point]) -> SweepRecord:
        """This sweep with ``points`` added after its own (none of them already in it)."""
        return self.with_entries([PointEntry.of(p) for p in points])

    def with_entries(self, added: Sequence[PointEntry]) -> SweepRecord:
        """This sweep with the points of ``added`` after its own (none of them
        already in it, no two in one directory)."""
        entries = [*self.points, *added]
        checked_points([e.point for e in entries], "sweep")
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:  # only given names can meet: derived ones differ with their points
                raise ConfigError(f"sweep: two points in one directory, {entry.name!r}")
            seen.add(entry.name)
            check_template(self.settings.app_cmd, entry.point.names())
        return SweepRecord(self.settings, tuple(entries), self.created)

    def names(self) -> list[str]:
        return [entry.name for entry in self.points]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "created": self.created,
            "settings": self.settings.to_json(),
            "points": [entry.to_json() for entry in self.points],
        }

    @classmethod
    def from_json(cls, data: object, label: str) -> SweepRecord:
        """A stored record, checked as hostile input (one-line ``ConfigError``)."""
        if not isinstance(data, Mapping) or data.get("version") != RECORD_VERSION:
            raise ConfigError(f"{label} is not a sweep record of this version of chain")
        raw_points, created = data.get("points"), data.get("created")
        if not isinstance(raw_points, list) or len(raw_points) > MAX_POINTS:
            raise ConfigError(f"{label}: points must be a list of at most {MAX_POINTS}")
        if not isinstance(created, (int, float)) or isinstance(created, bool):
            raise ConfigError(f"{label}: created must be a time")
        raw_settings = data.get("settings")
        if not isinstance(raw_settings, Mapping):
            raise ConfigError(f"{label}: settings must be a JSON object")
        try:
            settings = from_json(raw_settings)
        except ConfigError as exc:
            raise ConfigError(f"{label}: {exc}") from None
        return cls(settings, (), float(created)).with_entries([_entry(p, label) for p in raw_points])


def _entry(raw: object, label: str) -> PointEntry:
    """A stored point: its name derived again, or its given ``dir`` checked again."""
    params = raw.get("params") if isinstance(raw, Mapping) else None
    if not isinstance(params, Mapping) or not params:
        raise ConfigError(f"{label}: a point without parameters")
    point = Point.of({check_name(k, label): check_value(v, f"{label}: {k}") for k, v in params.items()})
    if isinstance(raw, Mapping) and "dir" in raw:
        return PointEntry(check_dir_name(raw["dir"], label), point, given=True)
    return PointEntry.of(point)
