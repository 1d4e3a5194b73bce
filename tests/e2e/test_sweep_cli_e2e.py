"""``chain sweep`` end to end, on the local backend and on the dev cluster:
12 points from a sweep file and 12 from ``--param`` flags run to completion
as relay chains (12 runner jobs at a time fit the cluster's 16 slots); the
status shows every point in one table; a cancel stops the points still
running, a resume continues only those, an ``add`` submits only the new
points; the report's CSV and figure are read back."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import EXAMPLES, chain_cmd
from waiting import wait_until

# twelve relay runners at once take 12 of the dev cluster's 16 slots: on Slurm nothing runs beside them
# (another test's jobs would wait for a slot its timing does not allow for)
BACKENDS = pytest.mark.parametrize(
    "backend",
    [
        pytest.param("local", marks=pytest.mark.local),
        pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.alone]),
    ],
    indirect=True,
)

SHARED = {"mode": "relay", "max_iter": 6, "checkpoint_every": 2, "runner_time": "1:00", "runner_margin": 10}
FILE = """
app_cmd = "ITER_SECONDS=0.1 python3 ../app.py"
mode = "relay"
max_iter = 6
checkpoint_every = 2
runner_time = "0:40"
runner_margin = 10
backend = "{backend}"

[grid]
lr = [1e-3, 3e-4, 1e-4]
seed = [0, 1, 2, 3]
"""


def _sweep_dir(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    shutil.copy(EXAMPLES / "python" / "app.py", directory / "app.py")  # ../app.py from each point
    return directory


def _status(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(chain_cmd("sweep", "status", "--json", cwd=directory).stdout)
    return data


def _states(directory: Path) -> dict[str, str]:
    return {p["point"]: p["state"] for p in _status(directory)["points"]}


def _wait_all_completed(directory: Path, timeout: float = 150) -> None:
    out = chain_cmd("sweep", "wait", "--timeout", str(timeout), cwd=directory, timeout=timeout + 30, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@BACKENDS
def test_a_sweep_from_a_file_runs_every_point_and_shows_them_in_one_table(backend: str, tmp_path: Path) -> None:
    directory = _sweep_dir(tmp_path, "from-file")
    (tmp_path / "sweep.toml").write_text(FILE.replace("{backend}", backend))
    out = chain_cmd("sweep", "submit", str(tmp_path / "sweep.toml"), cwd=directory, timeout=120)
    assert out.stdout.strip() == f"sweep {directory}: 12 points submitted"
    table = chain_cmd("sweep", "status", cwd=directory, env={"COLUMNS": "160"}).stdout
    names = [f"lr={lr}_seed={s}" for lr in ("0.001", "0.0003", "0.0001") for s in range(4)]
    assert table.splitlines()[0].startswith(f"sweep {directory}: 12 points (")
    assert [line.split()[0] for line in table.splitlines()[2:]] == names, table  # one table, a row per point
    _wait_all_completed(directory)
    for name in names:
        assert (directory / name / "state_iter.txt").read_text().strip() == "6"
        assert json.loads((directory / name / "params.json").read_text())["lr"] in (1e-3, 3e-4, 1e-4)
    final = chain_cmd("sweep", "status", cwd=directory, env={"COLUMNS": "160"}).stdout
    assert "12 points (12 completed)" in final and final.count("6/6") == 12


@BACKENDS
def test_a_sweep_from_flags_cancelled_resumed_extended_and_reported(backend: str, tmp_path: Path) -> None:
    directory = _sweep_dir(tmp_path, "from-flags")
    settings = [f"--{k.replace('_', '-')}={v}" for k, v in SHARED.items()]
    # six fast points complete at once; six slow ones (6 s an iteration) are still at work at the cancel
    chain_cmd(
        "sweep", "submit", "--backend", backend, "--app-cmd", "ITER_SECONDS={speed} python3 ../app.py",
        *settings, "--param", "speed=0.05,6", "--param", "seed=0..5", cwd=directory, timeout=120,
    )  # fmt: skip
    fast = [f"seed={s}_speed=0.05" for s in range(6)]
    slow = [f"seed={s}_speed=6" for s in range(6)]

    def fast_done_slow_at_work() -> bool:
        states = _states(directory)
        at_work = all(states[n] == "running" and (directory / n / "iterations.log").exists() for n in slow)
        return at_work and all(states[n] == "completed" for n in fast)

    wait_until(
        fast_done_slow_at_work, timeout=90, interval=1.0, what="fast points done", describe=lambda: _states(directory)
    )
    ids = {p["point"]: p["chain_id"] for p in _status(directory)["points"]}

    cancelled = chain_cmd("sweep", "cancel", cwd=directory, timeout=120).stdout.splitlines()
    assert sorted(line.split(":")[0] for line in cancelled) == sorted(slow)
    states = _states(directory)
    assert [states[n] for n in fast] == ["completed"] * 6 and [states[n] for n in slow] == ["cancelled"] * 6

    resumed = chain_cmd("sweep", "resume", cwd=directory, timeout=120).stdout.splitlines()
    assert sorted(resumed[:-1]) == sorted(f"{n}: resumed" for n in slow) and resumed[-1] == "6 points resumed"
    added = chain_cmd("sweep", "add", "--param", "speed=0.05", "--param", "seed=5..7", cwd=directory, timeout=120)
    assert added.stdout.splitlines()[:2] == ["seed=6_speed=0.05: submitted", "seed=7_speed=0.05: submitted"]
    _wait_all_completed(directory, timeout=150)

    final = _status(directory)
    assert final["counts"]["completed"] == 14 and len(final["points"]) == 14
    assert all(ids[p["point"]] == p["chain_id"] for p in final["points"] if p["point"] in ids)  # the same chains
    for name in slow:  # resumed from its checkpoint, never started afresh
        starts = [line.split()[2] for line in (directory / name / "iterations.log").read_text().splitlines()
                  if line.split()[1] == "start"]  # fmt: skip
        assert len(starts) >= 2 and int(starts[-1]) > 0, starts

    chain_cmd("sweep", "report", cwd=directory, timeout=120)
    rows = list(csv.DictReader((directory / "report" / "sweep.csv").open()))
    assert [r["point"] for r in rows] == [*fast, *slow, "seed=6_speed=0.05", "seed=7_speed=0.05"]
    assert {(r["state"], r["iteration"], r["max_iter"]) for r in rows} == {("completed", "6", "6")}
    assert {r["param.speed"] for r in rows} == {"0.05", "6"} and all(int(r["runners"]) >= 1 for r in rows)
    from matplotlib.image import imread

    figure = imread(str(directory / "report" / "sweep.png"))
    assert figure.shape[0] >= 400 and figure.shape[1] >= 1000  # height, width of the two panels
    assert figure.std() > 0.05  # drawn, not blank
