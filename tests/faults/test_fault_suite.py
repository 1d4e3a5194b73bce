"""The fault-injection suite, bounded form (issue 7): every fault once on a
real chain on the cluster, each proven to have landed, then the invariants
(see driver.py). The long form: bash scripts/fault-suite --long [--seed N]."""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any

import pytest
from driver import run_suite

SEED = int(os.environ.get("FAULT_SUITE_SEED", "7"))
FAULTS = ("app-sigkill", "app-sigkill-retries", "garbage-counter", "scancel-runner", "submitter-scancel",
          "submitter-kill", "slurmctld-down", "slurmdbd-down", "node-down")


@pytest.mark.alone  # stops slurmctld/slurmdbd and downs the node under every other test
@pytest.mark.timeout(2400)  # it may first wait for other users' jobs to leave the cluster
def test_fault_suite_bounded(slurm_cluster: Any, tmp_path: Path) -> None:
    report = run_suite(SEED, "bounded", tmp_path)
    print(report.text())
    failed = [f for f in report.faults if not f["ok"]] + [i for i in report.invariants if not i["ok"]]
    assert report.ok, f"seed {SEED}: {failed}\n\n{report.text()}"
    proven = collections.Counter(f["fault"] for f in report.faults if f["ok"] and f["proof"])
    assert proven == collections.Counter(FAULTS), f"faults not each proven once:\n{report.text()}"
