"""The ranks' agreement at a step boundary (chain.app.ranks), with the
all-reduce played by a list of every rank's wish: any rank's save or stop
is every rank's, the highest exit code wins."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from chain.app.ranks import SINGLE, Ranks, agree, note_end
from chain.core.rankends import RankProgress, parse_rank_progress


def _world(wishes: list[tuple[bool, int | None]]) -> list[tuple[bool, int | None]]:
    """What each rank decides when the ranks' wishes are ``wishes``."""
    vectors = [[int(save), code or 0] for save, code in wishes]

    def all_max(_mine: Sequence[int]) -> list[int]:
        return [max(column) for column in zip(*vectors)]

    return [agree(Ranks(rank, len(wishes), all_max), *wish) for rank, wish in enumerate(wishes)]


def test_one_rank_is_its_own_decision() -> None:
    assert agree(SINGLE, True, None) == (True, None)
    assert agree(SINGLE, False, 99) == (False, 99)  # as the gate said: no collective
    assert SINGLE.main and SINGLE.gather("x") == ["x"]


@pytest.mark.parametrize(
    "wishes, decided",
    [
        ([(False, None), (False, None)], (False, None)),
        ([(True, None), (False, None)], (True, None)),  # one rank's checkpoint interval: all save
        ([(False, None), (True, 99)], (True, 99)),  # the stop signal reached rank 1 alone
        ([(True, 75), (True, 99), (False, None)], (True, 99)),  # a stop signal over a warning
        ([(False, None), (False, None), (True, 75)], (True, 75)),
    ],
)
def test_every_rank_takes_the_same_decision(
    wishes: list[tuple[bool, int | None]], decided: tuple[bool, int | None]
) -> None:
    assert _world(wishes) == [decided] * len(wishes)


def test_rank_zero_is_the_main_rank() -> None:
    assert [Ranks(r, 3).main for r in range(3)] == [True, False, False]


def test_a_rank_notes_its_end_for_the_runner_only_under_a_launcher(tmp_path: Path) -> None:
    note_end(3, 57, saved=True, environ={"CHAIN_RANKS_DIR": str(tmp_path)})
    assert parse_rank_progress((tmp_path / "progress-3.json").read_text()) == RankProgress(57, True)
    note_end(3, 58, saved=False, environ={})  # no launcher: nothing written anywhere
    assert [p.name for p in tmp_path.iterdir()] == ["progress-3.json"]


def test_a_note_that_cannot_be_written_does_not_end_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    note_end(0, 5, saved=True, environ={"CHAIN_RANKS_DIR": str(tmp_path / "gone")})
    assert "could not note rank 0's end" in caplog.text
