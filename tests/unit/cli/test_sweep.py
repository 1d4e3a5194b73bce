"""``chain sweep`` through typer's CliRunner, over the shared fake backend:
the commands adapt ``Sweep``; bad input is one line and a usage exit code."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from fakes import FakeBackend
from typer.testing import CliRunner

from chain.api.listing import ChainRow
from chain.backends import BACKENDS
from chain.cli.commands import app
from chain.cli.sweep import _reason
from chain.core.model import ChainState
from chain.store import ChainDir
from chain.sweep.params import Point
from chain.sweep.record import PointEntry
from chain.sweep.table import point_row

runner = CliRunner()
SWEEP_FILE = """
app_cmd = "python3 ../app.py --lr {lr} --seed {seed}"
max_iter = 10
runner_time = "10:00"
backend = "slurm"

[grid]
lr = [1e-3, 3e-4]
seed = [0, 1]
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    backend = FakeBackend()

    def make(chain_dir: Path, retry: object = None) -> FakeBackend:
        return backend

    monkeypatch.setitem(BACKENDS, "slurm", make)
    return backend


def _chain(args: list[str]) -> tuple[int, str, str]:
    result = runner.invoke(app, args, env={"COLUMNS": "200"}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_submit_from_a_file_then_status_in_one_table(fake: FakeBackend, tmp_path: Path) -> None:
    (tmp_path / "sweep.toml").write_text(SWEEP_FILE)
    code, out, err = _chain(["sweep", "submit", str(tmp_path / "sweep.toml"), "--dir", str(tmp_path / "s")])
    assert (code, err) == (0, "") and out.endswith("4 points submitted\n")
    code, out, _ = _chain(["sweep", "status", "--dir", str(tmp_path / "s")])
    assert code == 0 and "4 points (4 pending)" in out
    for name in ("lr=0.001_seed=0", "lr=0.001_seed=1", "lr=0.0003_seed=0", "lr=0.0003_seed=1"):
        assert name in out
    code, out, _ = _chain(["sweep", "status", "--json", "--dir", str(tmp_path / "s")])
    data = json.loads(out)
    assert data["counts"]["pending"] == 4 and len(data["points"]) == 4


def test_submit_from_flags_add_resume_cancel_report(fake: FakeBackend, tmp_path: Path) -> None:
    where = ["--dir", str(tmp_path / "s")]
    code, out, err = _chain(
        [
            "sweep",
            "submit",
            "--app-cmd",
            "true {lr}",
            "--backend",
            "slurm",
            "--max-iter",
            "5",
            "--param",
            "lr=0.1,0.2",
            *where,
        ]
    )
    assert code == 0, err
    code, out, _ = _chain(["sweep", "add", "--param", "lr=0.2,0.3", *where])
    assert code == 0 and out.splitlines() == ["lr=0.3: submitted", f"sweep {tmp_path / 's'}: 1 points added, 3 in all"]
    store = ChainDir(tmp_path / "s" / "lr=0.1" / ".chain")
    status = store.load_status()
    assert status is not None
    status.state = ChainState.COMPLETED
    store.save_status(status)
    code, out, _ = _chain(["sweep", "cancel", *where])
    assert code == 0 and sorted(line.split()[0] for line in out.splitlines()) == ["lr=0.2:", "lr=0.3:"]
    assert all("cancelled" in line for line in out.splitlines())
    code, out, err = _chain(["sweep", "resume", *where])
    assert code == 0, err
    assert sorted(out.splitlines()[:-1]) == ["lr=0.2: resumed", "lr=0.3: resumed"]
    code, out, _ = _chain(["sweep", "report", *where])
    assert code == 0 and f"wrote {tmp_path / 's' / 'report' / 'sweep.csv'}" in out
    rows = list(csv.DictReader((tmp_path / "s" / "report" / "sweep.csv").open()))
    assert [(r["point"], r["state"]) for r in rows] == [
        ("lr=0.1", "completed"),
        ("lr=0.2", "pending"),
        ("lr=0.3", "pending"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sweep", "submit", "--app-cmd", "true", "--param", "lr"], "expected NAME=VALUES"),
        (["sweep", "submit", "--app-cmd", "true", "--param", "x=a\x1bb"], "control character"),
        (["sweep", "submit", "--app-cmd", "true"], "no points"),
        (["sweep", "submit", "--app-cmd", "true {lrr}", "--param", "lr=1"], r"app_cmd names {lrr}"),
        (["sweep", "submit", "missing.toml"], "sweep file missing.toml does not exist"),
        (["sweep", "status"], "no sweep in"),
        (["sweep", "resume", "--max-iter", "x"], "'x' is not a valid int"),
        (
            ["sweep", "submit", "--app-cmd", "true", "--param", "a=1", "--parallel", "0"],
            "--parallel must be at least 1",
        ),
    ],
)
def test_bad_input_is_one_line(
    fake: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _chain(args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (code, err)
    assert "Traceback" not in out + err


def test_a_file_with_points_and_params_is_refused(
    fake: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.toml").write_text(SWEEP_FILE)
    code, _, err = _chain(["sweep", "submit", "sweep.toml", "--param", "lr=1"])
    assert code == 2 and "the sweep file has its points" in err
    assert not (tmp_path / "sweep.json").exists()


@pytest.mark.parametrize("source", ["flag", "file"])
def test_an_integer_too_long_to_read_back_leaves_no_sweep(
    fake: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """A 22-digit value was taken, written to sweep.json, and then refused as
    damaged by chain's own reader: a sweep no command could read."""
    monkeypatch.chdir(tmp_path)
    big = "1234567890123456789012"
    if source == "file":
        (tmp_path / "s.toml").write_text(f'app_cmd = "true"\nbackend = "slurm"\n[grid]\nn = [{big}]\n')
        args = ["sweep", "submit", "s.toml"]
    else:
        args = ["sweep", "submit", "--app-cmd", "true", "--backend", "slurm", "--param", f"n={big}"]
    code, out, err = _chain(args)
    assert code == 2 and "an integer of more than 18 digits" in err and len(err.strip().splitlines()) == 1, err
    assert "damaged" not in err and "Traceback" not in out + err
    assert not (tmp_path / "sweep.json").exists() and not fake.submitted


def test_a_sweep_directory_its_jobs_could_not_log_under_is_refused_first(fake: FakeBackend, tmp_path: Path) -> None:
    """A backslash turns sbatch's --output patterns off: every point would
    be refused at its submission, after sweep.json was written."""
    where = tmp_path / "a\\b"
    args = ["sweep", "submit", "--app-cmd", "true", "--backend", "slurm", "--param", "n=1,2", "--dir", str(where)]
    code, _, err = _chain(args)
    assert code == 2 and "holds a backslash" in err and len(err.strip().splitlines()) == 1, err
    assert not where.exists() and not fake.submitted


def test_wait_exits_0_only_when_every_point_completed(fake: FakeBackend, tmp_path: Path) -> None:
    where = ["--dir", str(tmp_path / "s")]
    args = ["sweep", "submit", "--app-cmd", "true {n}", "--backend", "slurm", "--param", "n=1,2", *where]
    assert _chain(args)[0] == 0
    for n, state in ((1, ChainState.COMPLETED), (2, ChainState.FAILED)):
        store = ChainDir(tmp_path / "s" / f"n={n}" / ".chain")
        status = store.load_status()
        assert status is not None
        status.state = state
        store.save_status(status)
    code, out, _ = _chain(["sweep", "wait", *where])
    assert code == 1 and "2 points (1 completed, 1 failed)" in out


def test_hostile_values_give_points_inside_the_sweep(fake: FakeBackend, tmp_path: Path) -> None:
    where = tmp_path / "s"
    args = ["sweep", "submit", "--app-cmd", "true {x}", "--backend", "slurm", "--dir", str(where)]
    code, _, err = _chain([*args, "--param", "x=..,../../up,/abs,a b,100%j," + "v" * 900])
    assert code == 0, err
    points = [p for p in where.iterdir() if p.is_dir()]
    assert len(points) == 6 and all((p / ".chain" / "state.json").is_file() for p in points)
    assert not (tmp_path / "up").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    stored = {json.loads((p / "params.json").read_text())["x"] for p in points}
    assert stored == {"..", "../../up", "/abs", "a b", "100%j", "v" * 900}


def test_the_reason_column_says_what_a_waiting_point_waits_on() -> None:
    entry = PointEntry.of(Point.of({"lr": 0.1}))
    row = point_row(entry, _listed("pending"), waiting="runner job 8 waits on priority (jobs ahead of it in the queue)")
    assert row.to_json()["waiting"] == row.waiting and _reason(row) == row.waiting
    assert _reason(point_row(entry, _listed("running"), "its submitter job has ended", "x")).startswith(
        "nothing drives"
    )
    assert _reason(point_row(entry, _listed("running"))) == "why"


def _listed(state: str) -> ChainRow:
    return ChainRow("/d", "chain-1", "submitter", state, 5, 10, 120.0, 150.0, "why")
