"""The one read model of a chain directory (``chain.store.view.ChainView``):
what status, list, logs, the report and the jobs' start-up read of a chain,
read one way; the strict settings for those that run or show the chain, the
few keys for those that list or report a damaged one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _chains import make_chain

from chain.core.model import ChainState
from chain.core.settings import Mode
from chain.errors import ChainDirError
from chain.store.view import ChainView, stored_values


def test_a_chain_reads_its_status_settings_counter_and_jobs(tmp_path: Path) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    view = ChainView.open(chain_dir)
    settings = view.settings()
    assert view.status.chain_id and view.max_iter == settings.max_iter and view.mode is settings.mode
    assert view.live_jobs == view.status.live_jobs()
    (tmp_path / settings.ckpt_path).write_text(f"{view.status.iteration + 7}\n")  # the app saved since
    assert view.counter == view.status.iteration + 7  # refreshed from the checkpoint, no program run


def test_no_chain_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ChainDirError, match="directory does not exist"):
        ChainView.open(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ChainDirError, match=r"no state\.json"):
        ChainView.open(tmp_path / "empty")


def test_damaged_settings_are_an_error_for_the_strict_readers_and_a_few_keys_for_the_others(tmp_path: Path) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    (chain_dir / "settings.json").write_text("{not json")
    with pytest.raises(ChainDirError, match="corrupt|invalid"):
        ChainView.open(chain_dir)  # chain status, chain list's row: said in one line
    lenient = ChainView.open(chain_dir, lenient=True)  # chain logs, chain cancel, the report
    assert lenient.stored == {} and lenient.max_iter == 0 and lenient.mode is Mode.SUBMITTER
    with pytest.raises(ChainDirError):
        lenient.settings()
    (chain_dir / "settings.json").write_text(json.dumps({"max_iter": True, "mode": "sideways"}))
    odd = ChainView.open(chain_dir)
    assert (odd.max_iter, odd.mode) == (0, Mode.SUBMITTER)  # a value of the wrong kind is not used
    (chain_dir / "settings.json").unlink()
    assert stored_values(ChainView.open(chain_dir).chain) == {}
