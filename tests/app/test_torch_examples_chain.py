"""The README `chain submit` lines of examples/python/torch and
examples/python/lightning, run as real chains on the local backend and on the
dev cluster's Slurm (both examples' chains at once, to halve the wall time).

Each chain must complete with at least two runners, every runner handing
over with a checkpoint, and its metrics.csv must hold every step exactly once
with the loss of an uninterrupted run of the same example: the resume across
real runner handoffs is exact.  On Slurm the runner is a real SLURM job, so
Lightning detects its SLURM environment: the callback must have turned the
auto-requeue off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from . import test_torch_example as example
from .conftest import EXAMPLES
from .test_torch_adapter import MISSING
from .test_torch_example import EXAMPLE_NAMES, flag, readme_line

references = example.references  # the session fixture: one reference run per example

# Lightning's import alone costs ~9 s of CPU, and every runner pays it inside
# a 40 s runner: beside 3 other test workers on 2 cores it took over 34 s and
# the runner's stop signal came before the app could take it (CI, 2026-12-01)
pytestmark = pytest.mark.heavy


@pytest.fixture(autouse=True)
def _torch_installed() -> None:
    if MISSING:
        pytest.fail(MISSING, pytrace=False)
    try:
        import lightning  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"{exc}; lightning is installed by `bash scripts/setup --dev`", pytrace=False)


@pytest.fixture(
    params=[
        pytest.param("local", marks=pytest.mark.local),
        pytest.param("slurm", marks=pytest.mark.slurm),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "slurm":
        request.getfixturevalue("slurm_cluster")
    return str(request.param)


def chain(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAIN_")}
    proc = subprocess.run(
        [sys.executable, "-m", "chain", *args],
        cwd=cwd,
        env=env,
        timeout=timeout,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"chain {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def wait_ended(cwds: list[Path], timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        reports = [json.loads(chain("status", "--json", cwd=d).stdout) for d in cwds]
        if all(r["state"] in ("completed", "failed", "stopped", "cancelled") for r in reports):
            return reports
        if time.monotonic() > deadline:
            logs = [(d / ".chain" / "chain.log").read_text() for d in cwds]
            pytest.fail(f"chains did not end in {timeout} s: {reports}\n" + "\n".join(logs))
        time.sleep(1)


def test_readme_lines_run_as_chains_of_several_runners(
    backend: str, tmp_path: Path, references: dict[str, Path]
) -> None:
    dirs = []
    for name in EXAMPLE_NAMES:
        d = tmp_path / name
        shutil.copytree(EXAMPLES / "python" / name, d, ignore=shutil.ignore_patterns("__pycache__"))
        argv = readme_line(name)
        chain(*argv[1:], "--backend", backend, "--poll-max", "5", cwd=d)
        dirs.append(d)
    reports = wait_ended(dirs, timeout=300)

    for name, d, report in zip(EXAMPLE_NAMES, dirs, reports):
        steps = flag(readme_line(name), "--max-iter")
        log = (d / ".chain" / "chain.log").read_text()
        assert report["state"] == "completed", f"{name}: {report}\n{log}"
        assert report["iteration"] == steps
        runners = report["runners"]
        assert len(runners) >= 2, f"{name}: one runner did it all; make the example longer"
        # 99: the app stopped itself before the deadline; 124: it was still
        # exiting when the runner's stop signal came (torch takes ~2 s to exit)
        assert all(r["exit_code"] in (99, 124) for r in runners[:-1]), runners
        assert runners[-1]["exit_code"] == 0
        assert [r["iter_before"] for r in runners[1:]] == [r["iter_after"] for r in runners[:-1]]
        metrics = (d / "metrics.csv").read_text()
        got = [int(row.split(",")[0]) for row in metrics.splitlines()[1:]]
        assert got == list(range(1, steps + 1)), f"{name}: each step exactly once"
        reference = (references[name] / "metrics.csv").read_text()
        assert metrics == reference, f"{name}: the loss curve differs from an uninterrupted run"
        run_log = (d / "train_run.log").read_text()
        assert run_log.count("start at step") == len(runners)
        if backend == "slurm" and name == "lightning":
            assert "auto-requeue turned off" in run_log
