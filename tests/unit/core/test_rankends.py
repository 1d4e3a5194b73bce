"""The ranks' end records, parsed from whatever a rank wrote, and the judgment from them."""

from __future__ import annotations

import json

import pytest

from chain.core.rankends import RankEnd, RanksJudgment, judge_ranks, parse_rank_end


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
