"""``chain logs`` (``chain.api.logs``): which job's output, its end only,
and following it across runners until the chain ends (on an injected sleep)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _chains import make_chain

from chain.api.logs import LogSource, follow, read_output, runner_log
from chain.api.status import open_chain
from chain.core.decision import Verdict
from chain.core.model import ChainState, JobState
from chain.errors import ChainDirError, ChainError
from chain.store import ChainDir, JudgedRunner


def test_a_runner_line_without_a_number_is_not_runner_none(tmp_path: Path) -> None:
    chain_dir = ChainDir(make_chain(tmp_path, 0, ChainState.FAILED))
    chain_dir.append_runner(JudgedRunner(job_id="77", state=JobState.FAILED, verdict=Verdict.STOP, reason="r"))
    view = open_chain(chain_dir.root)
    source = runner_log(view.chain, view.status)
    assert source.what == "runner (job 77)"


def test_runner_n_is_found_by_its_number_the_current_one_first(tmp_path: Path) -> None:
    chain = ChainDir(make_chain(tmp_path, 3, ChainState.COMPLETED))  # runners 1..3 are jobs 10..12
    status = chain.load_status()
    assert status is not None
    assert runner_log(chain, status).what == "runner 3 (job 12)"  # the last one's when none is current
    assert runner_log(chain, status, 2) == LogSource("runner 2 (job 11)", "11", chain.runner_output("11"))
    status.runner_seq, status.runner_job_id = 4, "13"  # runner 4 runs: not in runners.jsonl yet
    assert runner_log(chain, status).job_id == runner_log(chain, status, 4).job_id == "13"
    with pytest.raises(ChainDirError, match="chain chain-abcdef has no runner 9"):
        runner_log(chain, status, 9)


def test_only_the_end_of_a_long_output_is_read_and_a_first_line_says_so(tmp_path: Path) -> None:
    chain = ChainDir(make_chain(tmp_path, 1, ChainState.COMPLETED))
    source = LogSource("runner 1 (job 10)", "10", chain.runner_output("10"))
    with pytest.raises(ChainError, match=r"runner-10.out does not exist \(yet\)"):
        read_output(chain, source)
    source.path.write_text("".join(f"line {i}\n" for i in range(100)))
    assert read_output(chain, source, max_bytes=10_000) == source.path.read_text()
    shown = read_output(chain, source, max_bytes=16)  # of 790 bytes: 10 lines of 7, 90 of 8
    assert shown == f"[... the first 774 bytes are not shown: the whole output is {source.path}]\nline 98\nline 99\n"


def test_follow_moves_on_to_the_next_runner_and_stops_when_the_chain_ends(tmp_path: Path) -> None:
    root = make_chain(tmp_path, 1, ChainState.RUNNING)
    chain = ChainDir(root)
    status = chain.load_status()
    assert status is not None
    status.runner_job_id = "10"
    chain.save_status(status)
    chain.runner_output("10").write_text("a\n")
    printed: list[str] = []
    looks = []

    def sleep(seconds: float) -> None:  # between two looks, the chain goes on
        looks.append(seconds)
        current = chain.load_status()
        assert current is not None
        if len(looks) == 1:
            with chain.runner_output("10").open("a") as fh:
                fh.write("b\n")
        elif len(looks) == 2:
            with chain.runner_output("10").open("a") as fh:
                fh.write("c\n")  # its last words, written as runner 2 starts
            chain.runner_output("11").write_text("d\n")
            current.runner_seq, current.runner_job_id = 2, "11"
        else:
            with chain.runner_output("11").open("a") as fh:
                fh.write("e\n")
            current.state = ChainState.COMPLETED
        chain.save_status(current)

    follow(root, printed.append, interval=2.0, sleep=sleep)
    assert "".join(printed) == (
        f"==> runner 1 (job 10): {chain.runner_output('10')} <==\na\nb\nc\n"
        f"==> runner 2 (job 11): {chain.runner_output('11')} <==\nd\ne\n"
    )
    assert looks == [2.0, 2.0, 2.0]  # it returned at the first look after the end
