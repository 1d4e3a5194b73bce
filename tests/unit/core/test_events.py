"""The protocol's vocabulary (``chain.core.events``): events and effects are
frozen records (the executor keeps the events it applied and applies them
again over a newer state.json: one changed meanwhile would be another event),
and each event says what it means (the docs' protocol table shows it)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from chain.core import events as ev
from chain.core.model import ChainState

EVENTS = typing.get_args(ev.Event)
EFFECTS = typing.get_args(ev.Effect)


@pytest.mark.parametrize("kind", EVENTS + EFFECTS, ids=lambda kind: kind.__name__)
def test_every_event_and_effect_is_a_frozen_record(kind: type) -> None:
    assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_an_applied_event_cannot_change_under_the_executor() -> None:
    ended = ev.Ended(ChainState.CANCELLED, "cancelled by chain cancel")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ended.reason = "stopped"  # type: ignore[misc]
    same = ev.Ended(ChainState.CANCELLED, "cancelled by chain cancel")
    assert ended == same and hash(ended) == hash(same)


@pytest.mark.parametrize("kind", EVENTS, ids=lambda kind: kind.__name__)
def test_every_event_says_what_it_means_in_its_own_words(kind: type) -> None:
    """Not the signature dataclass writes when a class has no docstring."""
    doc = kind.__doc__ or ""
    assert doc.strip() and not doc.startswith(f"{kind.__name__}(")


def test_the_two_unions_share_no_member() -> None:
    assert not set(EVENTS) & set(EFFECTS) and len(set(EVENTS)) == len(EVENTS)
