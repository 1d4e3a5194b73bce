"""The fault-injection suite, bounded form (issues 7, 15, 16): every fault
that applies to the mode once on a real chain on the cluster, each proven to
have landed, then the invariants (see driver.py). Relay mode has no submitter
job: its submitter faults and slurmdbd-down (aimed at the submitter's
accounting query) are not scheduled. The long form:
bash scripts/fault-suite --long [--mode relay] [--seed N]."""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any

import pytest
from driver import run_suite

SEED = int(os.environ.get("FAULT_SUITE_SEED", "7"))
BOTH = (
    "app-sigkill",
    "app-sigkill-retries",
    "garbage-counter",
    "scancel-runner",
    "slurmctld-down",
    "node-down",
    "supervisor-kill",
    "racing-commands",
)
FAULTS = {"submitter": BOTH + ("submitter-scancel", "submitter-kill", "slurmdbd-down"), "relay": BOTH}


@pytest.mark.alone  # stops slurmctld/slurmdbd and downs the node under every other test
@pytest.mark.timeout(2400)  # it may first wait for other users' jobs to leave the cluster
@pytest.mark.parametrize("mode", ["submitter", "relay"])
def test_fault_suite_bounded(slurm_cluster: Any, tmp_path: Path, mode: str) -> None:
    report = run_suite(SEED, "bounded", tmp_path, mode=mode)
    print(report.text())
    failed = [f for f in report.faults if not f["ok"]] + [i for i in report.invariants if not i["ok"]]
    assert report.ok, f"seed {SEED}, {mode} mode: {failed}\n\n{report.text()}"
    proven = collections.Counter(f["fault"] for f in report.faults if f["ok"] and f["proof"])
    assert proven == collections.Counter(FAULTS[mode]), f"faults not each proven once:\n{report.text()}"


def test_the_driver_runs_as_scripts_fault_suite_runs_it() -> None:
    """scripts/fault-suite runs driver.py as a script, outside pytest's
    sys.path: its imports must resolve there too (they did not for a day)."""
    import subprocess
    import sys

    driver = Path(__file__).with_name("driver.py")
    proc = subprocess.run([sys.executable, str(driver), "--help"], capture_output=True, text=True, check=False, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert "--seed" in proc.stdout
