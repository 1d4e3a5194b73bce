"""``hydra/launcher=chain`` end to end, on the local backend and on the dev
cluster: a 2 x 3 multirun of a tiny Hydra training (its own checkpoint file
beside Hydra's output) runs as 6 relay chains, each in its job's Hydra
output directory (``.hydra/`` there), submitted without waiting, cancelled
with ``chain sweep cancel`` at work, continued by the same multirun again
(which waits), every step computed exactly once; each job's return value
comes back to the multirun; the sweep directory is a chain sweep (status,
report); a third run leaves the completed chains alone."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import REPO, chain_cmd
from waiting import wait_until

# six relay runners and their queued successors take 12 of the dev cluster's 16 slots:
# on Slurm nothing runs beside them (another test's jobs would wait for a slot their timing does not allow for)
BACKENDS = pytest.mark.parametrize(
    "backend",
    [
        pytest.param("local", marks=pytest.mark.local),
        pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.alone]),
    ],
    indirect=True,
)

MAX_ITER = 6
STEP_SECONDS = 1.5  # six steps (9 s) do not fit one runner: 10 s less its 4 s margin
CONFIG = "lr: 0.1\nseed: 0\n"
TRAIN = """
import json, os, signal, sys, time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig


@hydra.main(version_base=None, config_path="conf", config_name="config")
def train(cfg):
    out = Path(HydraConfig.get().runtime.output_dir)
    ckpt = out / "model.json"  # the training's own checkpoint, beside .hydra/
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"step": 0, "w": 0.0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(out / "train.events", "a") as log:
        log.write(f"start {state['step']}\\n")
    while state["step"] < int(os.environ["MAX_ITER"]) and not stop:
        time.sleep(STEP_SECONDS)
        state = {"step": state["step"] + 1, "w": state["w"] + cfg.lr * (1.0 + cfg.seed - state["w"])}
        state["num"] = HydraConfig.get().job.num
        (out / "model.tmp").write_text(json.dumps(state))
        os.replace(out / "model.tmp", ckpt)
        with open(out / "train.events", "a") as log:
            log.write(f"step {state['step']}\\n")
        Path(os.environ["CKPT_PATH"] + ".tmp").write_text(str(state["step"]))
        os.replace(os.environ["CKPT_PATH"] + ".tmp", os.environ["CKPT_PATH"])  # chain's counter, after the checkpoint
    if state["step"] < int(os.environ["MAX_ITER"]):
        sys.exit(99)  # checkpointed: the chain goes on
    return round(state["w"], 6)  # the multirun's JobReturn gets it


if __name__ == "__main__":
    train()
""".replace("STEP_SECONDS", str(STEP_SECONDS))
GRID = ("lr=0.1,0.01", "seed=0,1,2")
JOBS = [(lr, seed) for lr in ("0.1", "0.01") for seed in (0, 1, 2)]


def _weight(lr: float, seed: int) -> float:
    """The training's result after MAX_ITER steps, as the app computes it."""
    w = 0.0
    for _ in range(MAX_ITER):
        w = w + lr * (1.0 + seed - w)
    return round(w, 6)


def _app(tmp_path: Path) -> Path:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(CONFIG)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def _multirun(cwd: Path, *overrides: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python train.py -m ... hydra/launcher=chain``, as a user types it (the
    checkout first on the path: Hydra finds the launcher however chain was installed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "train.py", "-m", *overrides, "hydra/launcher=chain", "hydra.sweep.dir=multirun"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _events(job: Path) -> str:
    """The training's own log of a job: its starts and steps."""
    return (job / "train.events").read_text() if (job / "train.events").exists() else ""


def _sweep(cwd: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(chain_cmd("sweep", "status", "--json", "--dir", "multirun", cwd=cwd).stdout)
    return data


@BACKENDS
def test_a_multirun_runs_as_one_chain_per_job_in_hydras_job_directories(backend: str, tmp_path: Path) -> None:
    cwd = _app(tmp_path)
    sweep = cwd / "multirun"
    launcher = [
        f"hydra.launcher.backend={backend}",
        "hydra.launcher.mode=relay",
        f"hydra.launcher.max_iter={MAX_ITER}",
        "hydra.launcher.runner_time='0:10'",
        "hydra.launcher.runner_margin=4",
        "hydra.launcher.poll=1",
    ]
    first = _multirun(cwd, *GRID, *launcher, "hydra.launcher.wait=false", timeout=120)
    assert first.returncode == 0 and f"chain sweep status --dir {sweep}" in first.stdout, first.stdout + first.stderr
    wait_until(
        lambda: all("step 1" in _events(sweep / str(num)) for num in range(6)),
        timeout=120,
        interval=0.5,
        what="every job at work",
        describe=lambda: _sweep(cwd)["counts"],
    )
    cancelled = chain_cmd("sweep", "cancel", "--dir", "multirun", cwd=cwd, timeout=120).stdout.splitlines()
    assert sorted(line.split(":")[0] for line in cancelled) == [str(num) for num in range(6)], cancelled
    ids = [p["chain_id"] for p in _sweep(cwd)["points"]]

    run = _multirun(cwd, *GRID, *launcher)  # the same multirun again: its cancelled chains go on, and it waits
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(": resumed\n") == 6, run.stdout
    for num, (lr, seed) in enumerate(JOBS):
        job = sweep / str(num)  # Hydra's own job directory: hydra.sweep.dir / hydra.sweep.subdir
        assert (job / ".hydra" / "overrides.yaml").read_text() == f"- lr={lr}\n- seed={seed}\n"
        assert (job / ".chain" / "state.json").is_file() and (job / "state_iter.txt").read_text() == str(MAX_ITER)
        assert json.loads((job / "params.json").read_text()) == {"job_num": num, "overrides": f"lr={lr} seed={seed}"}
        events = _events(job).split("\n")[:-1]
        assert [e for e in events if e.startswith("step")] == [f"step {i}" for i in range(1, MAX_ITER + 1)], events
        starts = [int(e.split()[1]) for e in events if e.startswith("start")]
        assert len(starts) >= 2 and starts[0] == 0 and starts[1] > 0, events  # resumed from model.json
        model = json.loads((job / "model.json").read_text())
        assert model["step"] == MAX_ITER and model["num"] == num  # hydra.job.num in the job's own run
        assert f"#{num} : completed, returned {_weight(float(lr), seed)}\n" in run.stdout, run.stdout
    status = _sweep(cwd)
    assert [p["point"] for p in status["points"]] == [str(n) for n in range(6)]
    assert status["counts"]["completed"] == 6 and [p["chain_id"] for p in status["points"]] == ids, status

    chain_cmd("sweep", "report", "--quiet", "--dir", "multirun", cwd=cwd, timeout=120)
    rows = list(csv.DictReader((sweep / "report" / "sweep.csv").open()))
    assert [(r["point"], r["state"], r["param.job_num"]) for r in rows] == [
        (str(n), "completed", str(n)) for n in range(6)
    ]

    before = [_events(sweep / str(num)) for num in range(6)]
    again = _multirun(cwd, *GRID, *launcher, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "submitted" not in again.stdout + again.stderr and "resumed" not in again.stdout + again.stderr
    assert [p["chain_id"] for p in _sweep(cwd)["points"]] == ids  # the same chains, left alone: nothing ran
    assert [_events(sweep / str(num)) for num in range(6)] == before


@pytest.mark.local
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hydra.launcher.max_iter=abc", "hydra/launcher=chain: hydra.launcher.max_iter must be an integer, got 'abc'"),
        ("hydra.launcher.runner_margin=900", "runner margin 900s must be smaller than the runner time"),
    ],
)
def test_a_bad_launcher_config_is_one_line_and_no_traceback(override: str, message: str, tmp_path: Path) -> None:
    run = _multirun(_app(tmp_path), "seed=0,1", "hydra.launcher.backend=local", override, timeout=60)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert message in run.stderr.splitlines()[0], run.stderr
    assert not (tmp_path / "multirun" / "sweep.json").exists()
