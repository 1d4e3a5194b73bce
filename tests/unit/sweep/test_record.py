"""``sweep.json``: written and read back; a hand-edited record is hostile input."""

from __future__ import annotations

import pytest

from chain.core.settings import Settings
from chain.errors import ConfigError
from chain.sweep.params import Point
from chain.sweep.record import SweepRecord

SHARED = Settings(app_cmd="python3 ../app.py --lr {lr}", max_iter=20)


def _record() -> SweepRecord:
    return SweepRecord.new(SHARED, [Point.of({"lr": 0.1}), Point.of({"lr": 0.2})], 100.0)


def test_a_record_round_trips() -> None:
    record = _record()
    again = SweepRecord.from_json(record.to_json(), "sweep.json")
    assert again == record and again.names() == ["lr=0.1", "lr=0.2"]


def test_points_are_added_after_the_others_and_checked() -> None:
    record = _record().with_points([Point.of({"lr": 0.3})])
    assert record.names() == ["lr=0.1", "lr=0.2", "lr=0.3"]
    with pytest.raises(ConfigError, match="given twice"):
        record.with_points([Point.of({"lr": 0.1})])
    with pytest.raises(ConfigError, match=r"app_cmd names \{lr\}"):
        record.with_points([Point.of({"seed": 1})])


def test_a_stored_name_is_never_trusted() -> None:
    data = _record().to_json()
    data["points"][0]["name"] = "../../elsewhere"
    assert SweepRecord.from_json(data, "s").names()[0] == "lr=0.1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version=99), "not a sweep record"),
        (lambda d: d.update(points="x"), "points must be a list"),
        (lambda d: d.update(created="x"), "created must be a time"),
        (lambda d: d.update(settings=[1]), "settings must be a JSON object"),
        (lambda d: d["settings"].update(max_iter=0), "at least 1"),
        (lambda d: d["settings"].update(evil=1), "unknown key 'evil'"),
        (lambda d: d["points"].append({"params": {"lr": [1]}}), "a list"),
        (lambda d: d["points"].append({"params": {}}), "without parameters"),
        (lambda d: d["points"].append({"params": {"lr": 0.1}}), "given twice"),
    ],
)
def test_a_damaged_record_is_one_line(change: object, message: str) -> None:
    data = _record().to_json()
    change(data)  # type: ignore[operator]
    with pytest.raises(ConfigError, match=message):
        SweepRecord.from_json(data, "s")
