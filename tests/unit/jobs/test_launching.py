"""The runner's side of a launch: the facts gathered, the ranks' folder made
fresh, and their records read back whatever is in the folder."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from chain.core.rankends import RankEnd
from chain.jobs.launching import free_port, fresh_ranks_dir, gather_site, gpus_on_node, rank_wrapper, read_rank_ends
from chain.store import ChainDir


def _write(folder: Path, rank: int, code: int, world: int = 3) -> None:
    (folder / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, "world": world, "exit_code": code}))


def test_the_records_of_the_world_are_read_and_anything_else_is_absent(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    folder = fresh_ranks_dir(chain, "4711")
    _write(folder, 0, 99)
    _write(folder, 2, 99)
    (folder / "rank-1.json").symlink_to(tmp_path / "elsewhere.json")  # a link: never followed
    (tmp_path / "elsewhere.json").write_text(json.dumps({"rank": 1, "world": 3, "exit_code": 99}))
    os.mkfifo(folder / "rank-3.json")  # beyond the world, and a FIFO: never opened
    (folder / "rank-4.json").write_text("x" * 100_000)
    assert read_rank_ends(folder, 3) == [RankEnd(0, 3, 99), RankEnd(2, 3, 99)]
    assert read_rank_ends(folder, 5) == [RankEnd(0, 3, 99), RankEnd(2, 3, 99)]  # a FIFO and a huge file: absent


def test_an_adapters_note_beside_a_record_is_read_with_it_and_a_bad_one_is_no_note(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(3):
        _write(folder, rank, 99, world=3)
    (folder / "progress-0.json").write_text(json.dumps({"step": 40, "saved": True}))
    os.mkfifo(folder / "progress-1.json")  # never opened
    (folder / "progress-2.json").symlink_to(folder / "progress-0.json")  # a link: never followed
    assert read_rank_ends(folder, 3) == [RankEnd(0, 3, 99, step=40, saved=True), RankEnd(1, 3, 99), RankEnd(2, 3, 99)]


def test_a_record_filed_under_another_ranks_name_is_not_believed(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    (folder / "rank-0.json").write_text(json.dumps({"rank": 1, "world": 2, "exit_code": 0}))
    assert read_rank_ends(folder, 2) == []


def test_a_missing_folder_has_no_records(tmp_path: Path) -> None:
    assert read_rank_ends(tmp_path / "none", 2) == []


def test_each_runner_starts_with_an_empty_folder_and_earlier_ones_go(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    first = fresh_ranks_dir(chain, "1")
    _write(first, 0, 99)
    second = fresh_ranks_dir(chain, "2")
    assert not first.exists() and second.is_dir() and list(second.iterdir()) == []


def test_a_link_in_place_of_the_ranks_folder_is_removed_not_followed(tmp_path: Path) -> None:
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    (chain.root / "ranks").symlink_to(outside)
    folder = fresh_ranks_dir(chain, "../../x\n")
    assert (outside / "keep").read_text() == "mine"
    assert folder.parent == chain.root / "ranks" and folder.name == "runner-....x"


def test_the_site_names_this_python_the_shipped_wrapper_and_a_free_port(tmp_path: Path) -> None:
    assert gather_site("12", {}, srun=True, rendezvous=False).port == ""  # nothing meets: no port looked for
    site = gather_site("12", {"SLURM_GPUS_ON_NODE": "4"}, srun=False, rendezvous=True)
    assert (site.job_id, site.gpus_on_node, site.srun) == ("12", 4, False)
    assert Path(site.worker) == rank_wrapper() and rank_wrapper().is_file()
    with socket.socket() as sock:
        sock.bind(("", int(free_port())))  # free when asked


def test_a_gpu_count_that_is_not_one_is_none() -> None:
    assert [gpus_on_node({"SLURM_GPUS_ON_NODE": v}) for v in ("2", " 8 ", "", "-1", "9" * 40, "2(x)")] == [
        2,
        8,
        0,
        0,
        0,
        0,
    ]
    assert gpus_on_node({}) == 0
