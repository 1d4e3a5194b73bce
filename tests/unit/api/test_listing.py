"""`chain list`: chains found under directories, and the user's registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chain.api import listing
from chain.api.status import status_report
from chain.cli import app
from chain.core.model import ChainState
from chain.core.resolution import resolve
from chain.store import ChainDir, ChainStatus, JudgedRunner, write_json


def _chain(path: Path, chain_id: str, state: ChainState) -> Path:
    chain = ChainDir(path)
    chain.create()
    write_json(chain.settings_file, resolve({"app_cmd": "x", "max_iter": "50"}, {}, {}).to_json())
    chain.save_status(ChainStatus(chain_id=chain_id, state=state, workdir=str(path.parent), reason="r", iteration=10))
    (path.parent / "state_iter.txt").write_text("10\n")  # the app's counter, which status reads
    return chain.root


def test_chains_are_found_to_a_bounded_depth(tmp_path: Path) -> None:
    a = _chain(tmp_path / "a" / ".chain", "chain-aaaaaa", ChainState.RUNNING)
    b = _chain(tmp_path / "sweep" / "lr1" / ".chain", "chain-bbbbbb", ChainState.COMPLETED)
    _chain(tmp_path / "1" / "2" / "3" / "4" / "5" / ".chain", "chain-deep00", ChainState.FAILED)  # too deep
    (tmp_path / "sweep" / "link").symlink_to(tmp_path / "a")  # not followed: no double
    assert listing.find_chains([tmp_path]) == sorted([a.resolve(), b.resolve()])
    rows = listing.list_rows(listing.find_chains([tmp_path]))
    assert {(r.chain_id, r.state, r.iteration, r.max_iter) for r in rows} == {
        ("chain-aaaaaa", "running", 10, 50),
        ("chain-bbbbbb", "completed", 10, 50),
    }


def test_the_registry_is_pruned_of_what_is_gone(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    kept = _chain(tmp_path / "kept" / ".chain", "chain-kept00", ChainState.RUNNING)
    gone = tmp_path / "gone" / ".chain"
    for path in (kept, gone, kept):
        listing.register(path, env)
    assert listing.registered(env) == [kept]
    assert listing.registry_path(env).read_text() == f"{kept}\n"
    assert listing.registered({"XDG_STATE_HOME": str(tmp_path / "none")}) == []


def test_list_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _chain(tmp_path / "run1" / ".chain", "chain-run100", ChainState.STOPPED)
    result = CliRunner().invoke(app, ["list", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.stderr
    assert [r["chain_id"] for r in json.loads(result.stdout)] == ["chain-run100"]
    table = CliRunner().invoke(app, ["list", str(tmp_path)], env={"COLUMNS": "200"})
    assert "chain-run100" in table.stdout and "stopped" in table.stdout and "10/50" in table.stdout
    empty = CliRunner().invoke(app, ["list", str(tmp_path / "run1" / "nothing-here")])
    assert empty.exit_code == 2 and "is not a directory" in empty.stderr
    device = CliRunner().invoke(app, ["list", "/dev/null"])  # was exit 1
    assert device.exit_code == 2 and device.stderr == "chain: error: /dev/null is not a directory\n", device.stderr
    (tmp_path / "empty").mkdir()
    none = CliRunner().invoke(app, ["list", str(tmp_path / "empty"), "--json"])
    assert none.exit_code == 0 and json.loads(none.stdout) == []


def _with(path: Path, **settings: str) -> Path:
    chain = ChainDir(path)
    write_json(chain.settings_file, resolve({"app_cmd": "x", "max_iter": "50", **settings}, {}, {}).to_json())
    return path


def test_a_row_reads_the_live_counter_file_but_never_runs_a_counter_command(tmp_path: Path) -> None:
    """A thousand chains list fast and without side effects: a plain counter file
    is read (a running chain moves between judgments), a --counter-cmd is not run;
    the counter is chain status's (store.counter.known_counter), an ended chain's too (a
    cancelled runner's last save is in its checkpoint, not in state.json)."""
    plain = _chain(tmp_path / "plain" / ".chain", "chain-plain0", ChainState.RUNNING)
    (tmp_path / "plain" / "state_iter.txt").write_text("17\n")
    marker = tmp_path / "ran"
    command = _with(
        _chain(tmp_path / "cmd" / ".chain", "chain-cmd000", ChainState.RUNNING), counter_cmd=f"touch {marker}; echo 33"
    )
    ended = _chain(tmp_path / "ended" / ".chain", "chain-ended0", ChainState.COMPLETED)
    (tmp_path / "ended" / "state_iter.txt").write_text("40\n")
    rows = {r.chain_id: r.iteration for r in listing.list_rows([plain, command, ended])}
    assert rows == {"chain-plain0": 17, "chain-cmd000": 10, "chain-ended0": 40}
    assert {d: status_report(d, live=False).iteration for d in (plain, command, ended)} == {
        plain: 17,
        command: 10,
        ended: 40,
    }
    assert not marker.exists()


def test_the_rate_is_chain_status_s_from_the_last_runners_alone(tmp_path: Path) -> None:
    chain_dir = _chain(tmp_path / "r" / ".chain", "chain-rate00", ChainState.RUNNING)
    chain = ChainDir(chain_dir)
    for i in range(30):  # one iteration a runner: 360 s each for 25 runners, then 36 s
        chain.append_runner(
            JudgedRunner(
                job_id=str(i),
                seq=i + 1,
                iter_before=i,
                iter_after=i + 1,
                start=3600.0 * i,
                end=3600.0 * i + (360.0 if i < 25 else 36.0),
            )
        )
    [row] = listing.list_rows([chain_dir], now=3600.0 * 30)
    # the last 5 runners: from runner 25's predecessor's end to runner 30's end
    window = (3600.0 * 29 + 36.0) - (3600.0 * 24 + 360.0)
    assert row.rate_per_hour is not None and row.rate_per_hour == pytest.approx(5 * 3600 / window)
    assert row.eta_seconds == pytest.approx((50 - 10) * 3600 / row.rate_per_hour)
    assert row.rate_per_hour == pytest.approx(status_report(chain_dir, live=False).metrics["rate_per_hour"])
