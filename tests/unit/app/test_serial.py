"""Checkpoint payload serializers (``chain.app.serial``): JSON round-trips
floats exactly, bytes pass through, nothing unpickles."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest

from chain.app.serial import BytesSerializer, JsonSerializer, Serializer


def test_json_round_trips_floats_bit_for_bit_and_is_stable() -> None:
    state: dict[str, Any] = {"b": [0.1 + 0.2, 1e-310, -0.0, math.inf], "a": 2**70, "t": (1, 2)}
    json_ = JsonSerializer()
    data = json_.dumps(state)
    back = json_.loads(data)
    assert [x.hex() for x in back["b"]] == [x.hex() for x in state["b"]]
    assert back["a"] == 2**70 and back["t"] == [1, 2]  # a tuple comes back a list
    assert data == json_.dumps({"t": (1, 2), "a": 2**70, "b": state["b"]})  # keys sorted: same state, same bytes
    assert math.isnan(json_.loads(json_.dumps(math.nan)))
    with pytest.raises(ValueError):
        json_.loads(b"{not json")


def test_bytes_pass_through_and_nothing_else_is_taken() -> None:
    raw = BytesSerializer()
    assert raw.dumps(bytearray(b"\x00\x01")) == b"\x00\x01" and raw.dumps(memoryview(b"ab")) == b"ab"
    assert raw.loads(b"\x00\x01") == b"\x00\x01"
    with pytest.raises(TypeError, match="BytesSerializer needs bytes, got str"):
        raw.dumps("text")


def test_neither_serializer_unpickles() -> None:
    pickled = pickle.dumps({"step": 3})
    assert BytesSerializer().loads(pickled) == pickled  # bytes, not the object
    with pytest.raises(ValueError):
        JsonSerializer().loads(pickled)


def test_both_are_serializers_by_their_names() -> None:
    assert isinstance(JsonSerializer(), Serializer) and isinstance(BytesSerializer(), Serializer)
    assert (JsonSerializer.name, BytesSerializer.name) == ("json", "bytes")
    assert json.loads(JsonSerializer().dumps({"x": 1})) == {"x": 1}
