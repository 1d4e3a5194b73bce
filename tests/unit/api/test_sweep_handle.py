"""``Sweep`` over the shared fake backend: a sweep's points submitted as
chains, looked at with one scheduler query, cancelled, resumed, extended
and reported. Nothing sleeps and no job runs: the chains' states are set."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from fakes import FakeBackend

from chain import Sweep
from chain.core.model import ChainState, JobState
from chain.errors import ChainDirError, ChainError, ConfigError
from chain.store import ChainDir
from chain.sweep.table import PointState

GRID = {"lr": [1e-3, 3e-4], "seed": [0, 1, 2]}
APP = "python3 ../app.py --lr {lr} --seed {seed}"


def _sweep(tmp_path: Path, fake: FakeBackend, **extra: object) -> Sweep:
    settings: dict[str, object] = {"app_cmd": APP, "max_iter": 10, "runner_time": "10:00", **extra}
    if "points" not in settings and "sweep_file" not in settings:
        settings.setdefault("grid", GRID)
    return Sweep.submit(tmp_path / "sweep", backend=fake, **settings)  # type: ignore[arg-type]


def _set(sweep: Sweep, name: str, state: ChainState, iteration: int | None = None) -> None:
    store = ChainDir(sweep.point_dir(name) / ".chain")
    status = store.load_status()
    assert status is not None
    status.state = state
    store.save_status(status)
    if iteration is not None:
        (sweep.point_dir(name) / "state_iter.txt").write_text(f"{iteration}\n")


def test_each_point_is_a_chain_in_its_own_directory(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake)
    names = sweep.record.names()
    assert names == [f"lr={lr}_seed={s}" for lr in ("0.001", "0.0003") for s in (0, 1, 2)]
    assert len(fake.submitted) == 12  # each point: its first runner and its submitter
    point = sweep.point_dir("lr=0.0003_seed=2")
    assert point == (tmp_path / "sweep" / "lr=0.0003_seed=2").resolve()
    assert json.loads((point / "params.json").read_text()) == {"lr": 0.0003, "seed": 2}
    stored = json.loads((point / ".chain" / "settings.json").read_text())
    assert stored["app_cmd"] == (
        "export CHAIN_SWEEP_POINT=lr=0.0003_seed=2 CHAIN_PARAM_LR=0.0003 CHAIN_PARAM_SEED=2; "
        "python3 ../app.py --lr 0.0003 --seed 2"
    )
    assert stored["max_iter"] == 10
    assert sorted(sweep.chains()) == sorted(names)


def test_status_asks_the_scheduler_once_for_the_whole_sweep(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake)
    for job in list(fake.states):
        fake.set_state(job, JobState.RUNNING)
    _set(sweep, "lr=0.001_seed=0", ChainState.COMPLETED, 10)
    lost = ChainDir(sweep.point_dir("lr=0.001_seed=1") / ".chain").load_status()
    assert lost is not None
    fake.set_state(lost.submitter_job_id, JobState.CANCELLED)
    before = fake.queries
    status = sweep.status()
    assert fake.queries - before == 1
    rows = {row.name: row for row in status.rows}
    assert len(rows) == 6 and rows["lr=0.001_seed=0"].state is PointState.COMPLETED
    assert rows["lr=0.001_seed=0"].iteration == 10
    assert rows["lr=0.001_seed=1"].stranded == "its submitter job has ended"
    assert status.counts["pending"] == 5 and status.counts["completed"] == 1
    assert json.loads(json.dumps(status.to_json()))["points"][0]["point"] == "lr=0.001_seed=0"


def test_a_read_never_writes_a_chain(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake)
    state = sweep.point_dir("lr=0.001_seed=0") / ".chain" / "state.json"
    before = state.read_bytes(), state.stat().st_mtime_ns
    sweep.status()
    sweep.report(now=1e9)
    assert (state.read_bytes(), state.stat().st_mtime_ns) == before


def test_cancel_stops_every_point_not_over(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake)
    _set(sweep, "lr=0.001_seed=0", ChainState.COMPLETED)
    lines = sweep.cancel()
    assert len(lines) == 5 and all("cancelled" in line for line in lines)
    states = {row.name: row.state for row in sweep.status().rows}
    assert states["lr=0.001_seed=0"] is PointState.COMPLETED
    assert [s for n, s in states.items() if n != "lr=0.001_seed=0"] == [PointState.CANCELLED] * 5


def test_resume_continues_only_the_points_that_did_not_complete(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake)
    for job in list(fake.states):
        fake.set_state(job, JobState.COMPLETED)  # nothing of the first run is alive
    _set(sweep, "lr=0.001_seed=0", ChainState.COMPLETED, 10)
    _set(sweep, "lr=0.001_seed=1", ChainState.CANCELLED, 4)
    _set(sweep, "lr=0.001_seed=2", ChainState.FAILED, 2)
    for name in sweep.record.names()[3:]:
        _set(sweep, name, ChainState.COMPLETED, 10)
    assert len(fake.limits_asked) == 1  # the site's job limits: asked once for the six points
    submitted = len(fake.submitted)
    lines = sweep.resume()
    assert sorted(lines) == ["lr=0.001_seed=1: resumed", "lr=0.001_seed=2: resumed"]
    assert len(fake.limits_asked) == 2  # and once for the two resumed
    assert [name.rsplit(".", 1)[1] for name, _ in fake.submitted[submitted:]] == ["s1", "s1"]  # a submitter each
    rows = {row.name: row for row in sweep.status().rows}
    assert rows["lr=0.001_seed=0"].state is PointState.COMPLETED
    assert rows["lr=0.001_seed=1"].state is PointState.PENDING


def test_resume_with_a_higher_max_iter_continues_the_completed_too(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake, grid={"lr": [0.1, 0.2]}, app_cmd="python3 ../app.py --lr {lr}")
    for job in list(fake.states):
        fake.set_state(job, JobState.COMPLETED)
    for name in sweep.record.names():
        _set(sweep, name, ChainState.COMPLETED, 10)
    assert sweep.resume() == []
    with pytest.raises(ConfigError, match="only raises it"):
        sweep.resume(max_iter=5)
    assert sorted(sweep.resume(max_iter=20)) == ["lr=0.1: resumed", "lr=0.2: resumed"]
    assert sweep.record.settings.max_iter == 20
    assert {row.max_iter for row in sweep.status().rows} == {20}


def test_add_submits_only_the_new_points(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake, grid={"lr": [0.1, 0.2]}, app_cmd="python3 ../app.py --lr {lr}")
    first = ChainDir(sweep.point_dir("lr=0.1") / ".chain").load_status()
    submitted = len(fake.submitted)
    assert sweep.add(grid={"lr": [0.1, 0.2, 0.3]}) == ["lr=0.3"]
    assert len(fake.submitted) - submitted == 2
    assert ChainDir(sweep.point_dir("lr=0.1") / ".chain").load_status() == first
    assert sweep.add(points=[{"lr": 0.2}]) == []
    assert sweep.record.names() == ["lr=0.1", "lr=0.2", "lr=0.3"]
    with pytest.raises(ConfigError, match=r"app_cmd names \{lr\}"):
        sweep.add(points=[{"seed": 1}])


def test_add_from_a_file_keeps_the_sweeps_settings(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake, grid={"lr": [0.1]}, app_cmd="python3 ../app.py --lr {lr}")
    same = tmp_path / "same.toml"
    same.write_text("max_iter = 10\n[grid]\nlr = [0.1, 0.5]\n")
    assert sweep.add(sweep_file=same) == ["lr=0.5"]
    other = tmp_path / "other.toml"
    other.write_text("max_iter = 99\n[grid]\nlr = [0.7]\n")
    with pytest.raises(ConfigError, match="max_iter differs from the sweep's"):
        sweep.add(sweep_file=other)


def test_settings_flag_over_environment_over_file(tmp_path: Path) -> None:
    fake = FakeBackend()
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        'app_cmd = "python3 ../app.py {lr}"\nmax_iter = 7\ncheckpoint_every = 3\n'
        'runner_time = "10:00"\n[grid]\nlr = [0.1]\n'
    )
    sweep = Sweep.submit(
        tmp_path / "s", sweep_file=spec, environ={"CHECKPOINT_EVERY": "4", "MAX_ITER": "8"}, max_iter=9, backend=fake
    )
    settings = sweep.record.settings
    assert (settings.max_iter, settings.checkpoint_every, settings.app_cmd) == (9, 4, "python3 ../app.py {lr}")


def test_a_second_submit_and_bad_input_are_refused(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake, grid={"lr": [0.1]}, app_cmd="true {lr}")
    with pytest.raises(ChainDirError, match="holds a sweep already"):
        Sweep.submit(sweep.directory, grid={"lr": [0.2]}, app_cmd="true", backend=fake)
    with pytest.raises(ConfigError, match="unknown setting 'max_iters'"):
        Sweep.submit(tmp_path / "b", grid={"lr": [1]}, app_cmd="true", max_iters=3, backend=fake)
    with pytest.raises(ConfigError, match="one way"):
        Sweep.submit(tmp_path / "c", grid={"lr": [1]}, points=[{"lr": 2}], app_cmd="true", backend=fake)
    with pytest.raises(ChainDirError, match="no sweep in"):
        Sweep.open(tmp_path / "nothing")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_points_that_fail_to_submit_are_named_and_resume_submits_them(tmp_path: Path) -> None:
    fake = FakeBackend()
    with pytest.raises(ChainError, match="2 of 2 points were not submitted .*missing-app.*chain sweep resume submits"):
        _sweep(tmp_path, fake, grid={"n": [1, 2]}, app_cmd="./missing-app {n}")
    sweep = Sweep.open(tmp_path / "sweep", backend=fake)
    assert [row.state for row in sweep.status().rows] == [PointState.NOT_SUBMITTED] * 2
    (sweep.directory / "n=1" / "missing-app").write_text("#!/bin/sh\n")
    (sweep.directory / "n=1" / "missing-app").chmod(0o755)
    with pytest.raises(ChainError, match="1 of 2 points were not submitted \\(n=2: app './missing-app' does not exist"):
        sweep.resume()
    assert [row.state for row in sweep.status().rows] == [PointState.PENDING, PointState.NOT_SUBMITTED]


def test_the_report_has_a_csv_row_per_point_and_a_figure(tmp_path: Path) -> None:
    fake = FakeBackend()
    sweep = _sweep(tmp_path, fake)
    _set(sweep, "lr=0.001_seed=0", ChainState.COMPLETED, 10)
    written = sweep.report(now=2e9)
    rows = list(csv.DictReader(written.csv.open()))
    assert [r["point"] for r in rows] == sweep.record.names()
    assert rows[0]["state"] == "completed" and rows[0]["iteration"] == "10" and rows[0]["param.lr"] == "0.001"
    assert rows[5]["param.seed"] == "2" and rows[5]["state"] == "pending"
    assert written.figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written.paths == [sweep.directory / "report" / "sweep.csv", sweep.directory / "report" / "sweep.png"]


def test_a_resume_asks_the_limits_once_for_the_resumed_and_the_new_points(tmp_path: Path) -> None:
    fake = FakeBackend()
    app = tmp_path / "sweep" / "n=1" / "missing-app"
    app.parent.mkdir(parents=True)
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    with pytest.raises(ChainError, match="1 of 2 points were not submitted"):
        _sweep(tmp_path, fake, grid={"n": [1, 2]}, app_cmd="./missing-app {n}")
    sweep = Sweep.open(tmp_path / "sweep", backend=fake)
    for job in list(fake.states):
        fake.set_state(job, JobState.COMPLETED)
    _set(sweep, "n=1", ChainState.CANCELLED, 4)
    (sweep.directory / "n=2" / "missing-app").write_text("#!/bin/sh\n")
    (sweep.directory / "n=2" / "missing-app").chmod(0o755)
    assert len(fake.limits_asked) == 1
    assert sorted(sweep.resume()) == ["n=1: resumed", "n=2: submitted"]
    assert len(fake.limits_asked) == 2  # once for the resumed point and the new one together
