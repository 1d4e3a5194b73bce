"""Serializers for checkpoint payloads.

Nothing here unpickles.  The default is JSON, which round-trips Python floats
exactly (``repr`` precision), so a JSON checkpoint resumes bit-identically.
:class:`BytesSerializer` passes raw bytes through for callers that encode
their own state (``struct``, ``array.tobytes``, safetensors, ...).

A caller who wants pickle (or ``torch.save``/``torch.load`` with
``weights_only=False``) can pass any object with ``name``, ``dumps`` and
``loads``.  That is the caller's choice: unpickling a file runs whatever code
the file names, so do it only on checkpoints you wrote yourself.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

__all__ = ["BytesSerializer", "JsonSerializer", "Serializer"]


@runtime_checkable
class Serializer(Protocol):
    """Turns a state object into bytes and back."""

    name: str

    def dumps(self, obj: Any) -> bytes:
        """Encode ``obj``."""
        ...

    def loads(self, data: bytes) -> Any:
        """Decode what :meth:`dumps` produced; raise ``ValueError`` on garbage."""
        ...


class JsonSerializer:
    """JSON (UTF-8).  Tuples come back as lists; NaN and infinities survive."""

    name = "json"

    def dumps(self, obj: Any) -> bytes:
        """Encode ``obj`` as compact JSON."""
        return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")

    def loads(self, data: bytes) -> Any:
        """Decode JSON; ``json.JSONDecodeError`` is a ``ValueError``."""
        return json.loads(data.decode("utf-8"))


class BytesSerializer:
    """Identity: the state already is ``bytes``."""

    name = "bytes"

    def dumps(self, obj: Any) -> bytes:
        """Return ``obj`` unchanged; it must be bytes-like."""
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError(f"BytesSerializer needs bytes, got {type(obj).__name__}")
        return bytes(obj)

    def loads(self, data: bytes) -> Any:
        """Return ``data`` unchanged."""
        return data
