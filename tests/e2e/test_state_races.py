"""Races on one chain's state.json, end to end, on both backends and in both
modes: ``chain cancel`` at a random moment while runners hand over every
second (the submitter or the relay runners save all the time), and two
``chain submit --resume`` at once. Nothing a process saved is lost: the
chain ends cancelled and stays so, and a resume runs one chain, never two
apps at once. ``CHAIN_RACE_ROUNDS`` sets the cancels per case (CI: 2; the
acceptance run: 20)."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_helpers import chain_cmd, status, wait_ended
from waiting import wait_until

ROUNDS = int(os.environ.get("CHAIN_RACE_ROUNDS", "2"))

# a runner of about a second: two iterations, then a voluntary checkpoint (99)
QUICK = r"""#!/bin/bash
echo "start $$ $(date +%s.%N)" >> apps.log
trap 'echo "end $$ $(date +%s.%N)" >> apps.log; exit 99' TERM
n=$(cat "$CKPT_PATH" 2>/dev/null || echo 0)
for _ in 1 2; do
    sleep 0.4 & wait $!
    n=$((n + 1)); echo $n > "$CKPT_PATH.tmp"; mv "$CKPT_PATH.tmp" "$CKPT_PATH"
    [ $n -ge "$MAX_ITER" ] && { echo "end $$ $(date +%s.%N)" >> apps.log; exit 0; }
done
echo "end $$ $(date +%s.%N)" >> apps.log
exit 99
"""


def _submit(tmp_path: Path, backend: str, mode: str, max_iter: int) -> None:
    (tmp_path / "app.sh").write_text(QUICK)
    chain_cmd(
        "submit",
        *("--mode", mode, "--backend", backend, "--max-iter", str(max_iter), "--app-cmd", "bash app.sh"),
        *("--runner-time", "2:00", "--runner-margin", "30", "--poll-max", "5"),
        cwd=tmp_path,
        timeout=120,
    )


def _judged(tmp_path: Path) -> int:
    log = tmp_path / ".chain" / "runners.jsonl"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _state(tmp_path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((tmp_path / ".chain" / "state.json").read_text())
    return data


@pytest.mark.parametrize("mode", ["submitter", "relay"])
def test_a_cancel_at_any_moment_of_quick_handoffs_is_never_lost(backend: str, mode: str, tmp_path: Path) -> None:
    rng = random.Random(f"{backend}-{mode}")  # a different moment each round, the same each run
    for round_ in range(ROUNDS):
        work = tmp_path / f"round-{round_}"
        work.mkdir()
        _submit(work, backend, mode, max_iter=10_000)
        wait_until(lambda w=work: _judged(w) >= 1, timeout=120, what="a first handoff")  # type: ignore[misc]
        time.sleep(rng.uniform(0.0, 1.5))  # anywhere in a runner's second, a save included
        chain_cmd("cancel", cwd=work, timeout=120)
        ended = wait_ended(work, timeout=120)
        assert ended["state"] == "cancelled", (round_, ended)
        time.sleep(3)  # a job saving late would show now
        again = _state(work)
        assert (again["state"], again["reason"]) == ("cancelled", "cancelled by chain cancel"), (round_, again)
        assert status(work)["state"] == "cancelled"


def test_two_resumes_at_once_run_one_chain(backend: str, tmp_path: Path) -> None:
    _submit(tmp_path, backend, "submitter", max_iter=12)
    wait_until(lambda: _judged(tmp_path) >= 1, timeout=120, what="a first handoff")
    chain_cmd("cancel", cwd=tmp_path, timeout=120)
    cycle = _state(tmp_path)["submitter_cycle"]
    argv = [sys.executable, "-m", "chain", "submit", "--resume"]
    both = [
        subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"
    ]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in both]
    codes = sorted(rc for rc, _, _ in outs)
    assert codes[0] == 0 and codes[1] != 0, outs  # one resumes; the other is refused
    refused = next(err for rc, _, err in outs if rc != 0)
    assert refused.startswith("chain: error: ") and refused.count("\n") == 1, refused
    report = wait_ended(tmp_path, timeout=300)
    assert report["state"] == "completed" and report["iteration"] == 12, report
    spans: dict[str, list[float]] = {}
    for line in (tmp_path / "apps.log").read_text().splitlines():
        _, pid, stamp = line.split()
        spans.setdefault(pid, []).append(float(stamp))
    ordered = sorted((min(v), max(v)) for v in spans.values())
    for (_, first_end), (second_start, _) in itertools.pairwise(ordered):
        assert second_start >= first_end, f"two apps ran at once: {ordered}"
    assert _state(tmp_path)["submitter_cycle"] == cycle + 1  # type: ignore[operator]  # one resume, not two
