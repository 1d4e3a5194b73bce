"""The Python API as a new user first meets it, on both backends:
``notify=`` is the setting and runs at the end, the app's own ``state.json``
in the working directory does not hide the chain, a bad counter is refused
before anything is queued and the working directory the call made is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import chain_cmd

from chain import Chain
from chain.errors import CheckpointError

# the app: its own state.json (a common checkpoint name) and the counter at MAX_ITER
APP = (
    "python3 -c \"import json, os; json.dump({'epoch': 1}, open('state.json', 'w')); "
    "open(os.environ['CKPT_PATH'], 'w').write(os.environ['MAX_ITER'])\""
)


def test_notify_runs_and_the_working_directory_names_its_chain(backend: str, tmp_path: Path) -> None:
    work = tmp_path / "run"
    said: list[str] = []
    run = Chain.submit(
        work,
        app_cmd=APP,
        max_iter=3,
        runner_time="0:30",
        runner_margin=10,
        poll_max=5,
        backend=backend,
        notify=['echo "$CHAIN_STATE" >> done'],
        on_message=said.append,
    )
    final = run.wait(timeout=240, poll=1)
    assert final.state.value == "completed", final.reason
    assert (work / "done").read_text() == "completed\n"  # the notify setting, not swallowed by a callback
    assert json.loads((work / "state.json").read_text()) == {"epoch": 1}  # the app's own, beside .chain
    assert Chain.open(work).chain_id == run.chain_id
    shown = json.loads(chain_cmd("status", "--json", "--chain-dir", str(work), cwd=tmp_path).stdout)
    assert shown["chain_id"] == run.chain_id and shown["state"] == "completed"


def test_a_bad_counter_is_refused_and_the_made_directory_removed(backend: str, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "state_iter.txt").write_text("v2 iter 10\n")
    with pytest.raises(CheckpointError, match="state_iter.txt does not hold a plain integer: 'v2 iter 10'"):
        Chain.submit(mine, app_cmd="true", max_iter=3, backend=backend)
    assert sorted(p.name for p in mine.iterdir()) == ["state_iter.txt"]  # nothing queued, nothing made
    with pytest.raises(CheckpointError):  # a directory the call made is removed again
        Chain.submit(
            tmp_path / "new" / "run", app_cmd="true", max_iter=3, backend=backend, ckpt_path="../../mine/state_iter.txt"
        )
    assert not (tmp_path / "new").exists()
