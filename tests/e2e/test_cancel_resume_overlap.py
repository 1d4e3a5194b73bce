"""`chain cancel` then at once `chain submit --resume`, with an app that
takes 12 s to stop, on both backends and in both modes:
the resumed chain's app never runs beside the cancelled one. The evidence is
the apps' own heartbeats (a line a second, with their pid), not chain's
records: no two pids beat in overlapping time spans."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from e2e_helpers import chain_cmd, wait_ended

SLOW_STOPPER = r"""#!/bin/bash
beat() { echo "$1 $$ $(date +%s.%N)" >> apps.log; }
beat start
trap 'for i in $(seq 12); do sleep 1; beat beat; done; beat end; exit 99' TERM
while true; do
    sleep 1; beat beat
    n=$(( $(cat state_iter.txt 2>/dev/null || echo 0) + 1 )); echo $n > state_iter.txt.tmp
    mv state_iter.txt.tmp state_iter.txt
    [ $n -ge 40 ] && { beat end; exit 0; }
done
"""


def _spans(log: Path) -> dict[str, tuple[float, float]]:
    spans: dict[str, tuple[float, float]] = {}
    for line in log.read_text().splitlines():
        _, pid, stamp = line.split()
        t = float(stamp)
        first, last = spans.get(pid, (t, t))
        spans[pid] = (min(first, t), max(last, t))
    return spans


@pytest.mark.parametrize("mode", ["submitter", "relay"])
def test_a_resume_right_after_cancel_never_runs_two_apps(backend: str, mode: str, tmp_path: Path) -> None:
    (tmp_path / "app.sh").write_text(SLOW_STOPPER)
    chain_cmd(
        "submit",
        "--mode",
        mode,
        "--backend",
        backend,
        "--max-iter",
        "40",
        "--app-cmd",
        "bash app.sh",
        "--runner-time",
        "2:00",
        "--runner-margin",
        "30",
        "--poll-max",
        "10",
        cwd=tmp_path,
    )
    log = tmp_path / "apps.log"
    deadline = time.time() + 90
    while time.time() < deadline and not (log.exists() and log.read_text().count("beat") >= 3):
        time.sleep(0.3)
    cancelled_at = time.time()
    chain_cmd("cancel", cwd=tmp_path, timeout=120)
    chain_cmd("submit", "--resume", cwd=tmp_path, timeout=120)
    report = wait_ended(tmp_path, timeout=300)
    assert report["state"] == "completed", report
    spans = sorted(_spans(log).values())
    assert len(spans) >= 2, f"the resumed chain ran no second app: {spans}"
    assert spans[0][1] > cancelled_at + 8, "the cancelled app did not outlive the cancel: the case is not exercised"
    for (_, first_end), (second_start, _) in itertools.pairwise(spans):
        assert second_start > first_end, f"two apps ran at once: {spans}"
    assert log.read_text().count("start") == len(spans)
