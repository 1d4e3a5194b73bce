"""The kinds of reason (``chain.core.reasons.ReasonKind``): stored by value,
each its member's name in lower case, and the three kinds by which Slurm
took a runner back."""

from __future__ import annotations

from chain.core.reasons import TAKEN_BACK, ReasonKind


def test_each_kind_is_stored_as_its_name_in_lower_case() -> None:
    assert [k.value for k in ReasonKind] == [k.name.lower() for k in ReasonKind]
    assert ReasonKind("lost_node") is ReasonKind.LOST_NODE and str(ReasonKind.LOST_NODE) == "lost_node"


def test_only_preemption_requeue_and_a_lost_node_are_taken_back() -> None:
    assert {k for k in ReasonKind if k.taken_back} == TAKEN_BACK
    assert TAKEN_BACK == {ReasonKind.PREEMPTED, ReasonKind.REQUEUED, ReasonKind.LOST_NODE}
    assert not ReasonKind.APP_FAILED.taken_back and not ReasonKind.STALLED.taken_back
