"""``sweep.json``: written and read back; a hand-edited record is hostile input."""

from __future__ import annotations

import pytest

from chain.core.settings import Settings
from chain.errors import ConfigError
from chain.sweep.params import Point
from chain.sweep.record import PointEntry, SweepRecord

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


def test_a_given_directory_is_kept_and_checked_again_on_read() -> None:
    shared = Settings(app_cmd="python3 app.py", max_iter=20)
    entries = [PointEntry.named("0", Point.of({"job_num": 0})), PointEntry.named("1", Point.of({"job_num": 1}))]
    record = SweepRecord.new(shared, [], 1.0).with_entries(entries)
    data = record.to_json()
    assert data["points"][0] == {"name": "0", "params": {"job_num": 0}, "dir": "0"}
    again = SweepRecord.from_json(data, "s")
    assert again == record and again.names() == ["0", "1"]
    data["points"][0]["dir"] = "../elsewhere"
    with pytest.raises(ConfigError, match="holds a '/'"):
        SweepRecord.from_json(data, "s")


def test_two_points_never_share_a_given_directory() -> None:
    record = SweepRecord.new(Settings(app_cmd="x", max_iter=2), [], 1.0)
    with pytest.raises(ConfigError, match="two points in one directory, '0'"):
        record.with_entries([PointEntry.named("0", Point.of({"n": 0})), PointEntry.named("0", Point.of({"n": 1}))])
    derived = record.with_points([Point.of({"n": 0})])
    with pytest.raises(ConfigError, match="two points in one directory"):
        derived.with_entries([PointEntry.named("n=0", Point.of({"n": 1}))])
