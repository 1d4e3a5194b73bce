"""The one JSON codec of the chain directory's records
(``chain.primitives.codec``): every field checked against its type hint,
missing keys defaulted, unknown keys ignored, transient fields never stored."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from chain.primitives.bounded import MAX_NUMBER
from chain.primitives.codec import TRANSIENT, RecordError, decode, encode


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Record:
    job_id: str
    seq: int = 0
    start: float | None = None
    colour: Colour = Colour.RED
    hosts: tuple[str, ...] = ()
    strikes: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    held: list[int] = field(default_factory=list, metadata=TRANSIENT)


def test_a_record_round_trips_through_json_and_transient_fields_stay_in_memory() -> None:
    record = Record("42", 3, 1.5, Colour.BLUE, ("n1", "n2"), {"n1": 2}, {"any": [1, "x"]}, held=[9])
    data = json.loads(json.dumps(encode(record)))
    assert "held" not in data and data["colour"] == "blue" and data["hosts"] == ["n1", "n2"]
    back = decode(Record, data)
    assert back == Record("42", 3, 1.5, Colour.BLUE, ("n1", "n2"), {"n1": 2}, {"any": [1, "x"]})
    assert decode(Record, {**data, "held": [1]}).held == []  # never read either
    assert encode(Record("7"), skip_none=True).keys() == encode(Record("7")).keys() - {"start"}


def test_missing_keys_take_their_defaults_and_unknown_keys_are_ignored() -> None:
    assert decode(Record, {"job_id": "7", "from_a_newer_writer": 1}) == Record("7")
    assert decode(Record, {"job_id": "7", "seq": 2}).start is None
    assert decode(Record, {"job_id": "7", "start": 5}).start == 5.0  # an integer is a float's value
    assert isinstance(decode(Record, {"job_id": "7", "start": 5}).start, float)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "not a JSON object"),
        ({"seq": 1}, "no job_id"),
        ({"job_id": 7}, "bad job_id 7"),
        ({"job_id": "7", "seq": True}, "bad seq True"),  # a bool is not a number
        ({"job_id": "7", "seq": "3"}, "bad seq '3'"),
        ({"job_id": "7", "seq": MAX_NUMBER + 1}, "bad seq"),
        ({"job_id": "7", "start": float("nan")}, "bad start nan"),
        ({"job_id": "7", "start": 1e300}, "bad start"),
        ({"job_id": "7", "colour": "green"}, "bad colour 'green'"),
        ({"job_id": "7", "hosts": "n1"}, "bad hosts 'n1'"),
        ({"job_id": "7", "hosts": ["n1", 2]}, "bad hosts"),
        ({"job_id": "7", "strikes": {"n1": "two"}}, "bad strikes"),
        ({"job_id": "7", "strikes": [1]}, "bad strikes"),
    ],
)
def test_a_field_that_does_not_fit_its_type_is_refused_naming_it(data: Any, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        decode(Record, data)


def test_lenient_reading_leaves_out_what_does_not_fit() -> None:
    data = {"job_id": "7", "seq": "two", "start": 4.0, "colour": "green"}
    assert decode(Record, data, lenient=True) == Record("7", start=4.0)
    with pytest.raises(RecordError, match="no job_id"):  # a required field is still required
        decode(Record, {"job_id": 7}, lenient=True)
