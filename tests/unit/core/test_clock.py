"""Deadlines do not jump with the system clock."""

from __future__ import annotations

from chain.core.clock import steady_clock


def test_a_stepped_wall_clock_does_not_move_the_steady_one() -> None:
    wall, mono = [1_000_000.0], [50.0]
    clock = steady_clock(lambda: wall[0], lambda: mono[0])
    assert clock() == 1_000_000.0
    wall[0] += 3600.0  # an admin (or NTP) steps the clock an hour ahead
    mono[0] += 10.0  # while ten seconds pass
    assert clock() == 1_000_010.0
    wall[0] -= 7200.0
    mono[0] += 5.0
    assert clock() == 1_000_015.0


def test_the_submitter_uses_it_by_default() -> None:
    from chain.jobs import submitter

    assert submitter.Submitter.__dataclass_fields__["clock"].default_factory is steady_clock
