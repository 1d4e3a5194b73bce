"""The ranks' end records, parsed from whatever a rank wrote, and the judgment from them."""

from __future__ import annotations

import json

import pytest

from chain.core.rankends import (
    RankEnd,
    RankProgress,
    RanksJudgment,
    judge_ranks,
    parse_rank_end,
    parse_rank_progress,
    with_progress,
)


def _end(rank: int, code: int, world: int = 2, host: str = "") -> RankEnd:
    return RankEnd(rank=rank, world=world, exit_code=code, host=host)


def test_a_record_the_wrapper_writes_is_read() -> None:
    text = json.dumps({"rank": 1, "world": 4, "exit_code": 99, "host": "node2"})
    assert parse_rank_end(text) == RankEnd(rank=1, world=4, exit_code=99, host="node2")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[1, 2]",
        '{"rank": 0, "world": 1}',
        '{"rank": 2, "world": 2, "exit_code": 0}',  # rank beyond the world
        '{"rank": -1, "world": 2, "exit_code": 0}',
        '{"rank": 0, "world": 2, "exit_code": 256}',
        '{"rank": true, "world": 2, "exit_code": 0}',
        '{"rank": 0, "world": 99999999999999999999, "exit_code": 0}',
        '{"rank": "0", "world": 2, "exit_code": 0}',
        "[" * 100000,  # deeper than the parser goes
    ],
)
def test_anything_else_is_no_record(text: str) -> None:
    assert parse_rank_end(text) is None


def test_a_host_with_control_characters_is_not_shown() -> None:
    end = parse_rank_end(json.dumps({"rank": 0, "world": 1, "exit_code": 0, "host": "a\x1b[2Jb"}))
    assert end is not None and end.host == ""


def test_torchruns_1_after_every_rank_checkpointed_is_a_checkpoint() -> None:
    judged = judge_ranks("torchrun", 1, [_end(0, 99), _end(1, 99)], 2)
    assert judged.exit_code == 99
    assert judged.note == "torchrun exited 1 after every rank exited 99"


def test_a_teardown_abort_after_every_rank_finished_is_done() -> None:
    judged = judge_ranks("torchrun", 1, [_end(0, 0), _end(1, 0)], 2)
    assert judged == RanksJudgment(0, "torchrun exited 1 after every rank exited 0")


def test_ranks_that_agree_with_the_launcher_add_nothing() -> None:
    assert judge_ranks("accelerate", 99, [_end(0, 99), _end(1, 99)], 2) == RanksJudgment(99)


def test_a_failed_rank_is_named_whatever_the_launcher_says() -> None:
    judged = judge_ranks("torchrun", 0, [_end(0, 99), _end(1, 3, host="n2"), _end(2, 1)], 3)
    assert judged == RanksJudgment(3, "rank 1 on n2 exited 3")


def test_the_highest_good_code_wins_as_the_ranks_agree_on_a_stop() -> None:
    assert judge_ranks("torchrun", 1, [_end(0, 75), _end(1, 99)], 2).exit_code == 99
    assert judge_ranks("torchrun", 1, [_end(0, 0), _end(1, 75)], 2).exit_code == 75


def test_a_missing_rank_leaves_the_launchers_code_and_says_which() -> None:
    judged = judge_ranks("torchrun", 1, [_end(0, 99, world=4), _end(2, 99, world=4)], 4)
    assert judged == RanksJudgment(1, "no end recorded by rank 1, 3 of 4: judged by torchrun's exit")


def test_a_missing_rank_under_a_launcher_that_exited_0_is_not_news() -> None:
    assert judge_ranks("torchrun", 0, [], 2) == RanksJudgment(0)


def test_records_of_ranks_outside_the_world_are_ignored() -> None:
    judged = judge_ranks("torchrun", 1, [_end(0, 99, world=8), _end(5, 7, world=8)], 1)
    assert judged.exit_code == 99


def test_many_missing_ranks_are_counted_not_listed() -> None:
    judged = judge_ranks("torchrun", 1, [], 100)
    assert "rank 0, 1, 2, 3, 4, 5, 6, 7 and 92 more of 100" in judged.note


def test_an_adapters_note_of_a_ranks_end_is_read() -> None:
    assert parse_rank_progress('{"step": 57, "saved": true}') == RankProgress(57, True)
    assert with_progress(_end(1, 99), RankProgress(57, False)) == RankEnd(1, 2, 99, step=57, saved=False)
    assert with_progress(_end(1, 99), None) == _end(1, 99)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[57]",
        '{"step": true, "saved": true}',  # a bool is no step
        '{"step": -1, "saved": true}',
        '{"step": 9007199254740993, "saved": true}',  # past any run's steps
        '{"step": 57.0, "saved": true}',
        '{"step": 57, "saved": 1}',  # saved must be a bool
        '{"step": 57}',
        "[" * 100_000,
    ],
)
def test_anything_else_is_no_note(text: str) -> None:
    assert parse_rank_progress(text) is None


def _noted(rank: int, code: int, step: int, saved: bool = True) -> RankEnd:
    return RankEnd(rank=rank, world=3, exit_code=code, step=step, saved=saved)


def test_ranks_that_stopped_at_different_steps_are_named() -> None:
    judged = judge_ranks("torchrun", 1, [_noted(0, 99, 57), _noted(1, 99, 57), _noted(2, 99, 58)], 3)
    assert judged.exit_code == 99
    assert judged.note == (
        "torchrun exited 1 after every rank exited 99; ranks stopped at different steps: 57 (rank 0, 1), 58 (rank 2)"
    )


def test_a_stop_without_its_checkpoint_is_named_and_one_step_agreed_says_nothing() -> None:
    judged = judge_ranks("accelerate", 99, [_noted(0, 99, 40, saved=False), _noted(1, 99, 40), _noted(2, 99, 40)], 3)
    assert judged == RanksJudgment(99, "rank 0 stopped without a checkpoint of its last step")
    assert judge_ranks("accelerate", 99, [_noted(r, 99, 40) for r in range(3)], 3) == RanksJudgment(99)
    # done: its last step needs no further checkpoint to be judged complete by the counter
    assert judge_ranks("accelerate", 0, [_noted(r, 0, 120, saved=r != 0) for r in range(3)], 3) == RanksJudgment(0)
