"""The fault-injection suite, bounded form (issue 7): every fault once on a
400-iteration chain on the real cluster, then the invariants (see driver.py).
The long form: bash scripts/fault-suite --long [--seed N]."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from driver import run_suite

SEED = int(os.environ.get("FAULT_SUITE_SEED", "7"))


@pytest.mark.timeout(1500)  # it may first wait for other users' jobs to leave the cluster
def test_fault_suite_bounded(slurm_cluster: Any, tmp_path: Path) -> None:
    report = run_suite(SEED, "bounded", tmp_path)
    print(report.text())
    failed = [f for f in report.faults if not f["ok"]] + [i for i in report.invariants if not i["ok"]]
    assert report.ok, f"seed {SEED}: {failed}\n\n{report.text()}"
    names = {f["fault"] for f in report.faults}
    for fault in ("app-sigkill", "app-sigkill-retries", "garbage-counter", "scancel-runner", "submitter-scancel",
                  "submitter-kill", "slurmctld-down", "slurmdbd-down", "node-down"):
        assert fault in names, f"fault {fault} was not injected:\n{report.text()}"
