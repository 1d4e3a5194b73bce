"""The report's printed lines (``chain.reporting.printed``): the allocation
line is a true sum, new work + redone + lost = allocated, and the table's
redone and lost columns add up to it, runner by runner."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from _backends import backends
from rich.console import Console

from chain.core.decision import Verdict
from chain.core.records import JudgedRunner
from chain.reporting.printed import allocation_line
from chain.reporting.report import make_report


def test_the_allocation_is_new_work_plus_redone_plus_lost() -> None:
    totals = {"allocated_s": 40.0, "useful_s": 36.0, "lost_s": 4.0, "redone_s": 5.5, "efficiency": 0.7625}
    assert allocation_line(totals) == ("allocated 40.0s = new work 30.5s + redone 5.5s + lost 4.0s (efficiency 76.2%)")


def test_with_the_redone_work_unknown_no_efficiency_is_claimed() -> None:
    totals = {"allocated_s": 40.0, "useful_s": 36.0, "lost_s": 4.0, "redone_s": None, "efficiency": None}
    assert allocation_line(totals) == "allocated 40.0s = useful 36.0s + lost 4.0s (efficiency unknown)"


def _judged(seq: int, before: int, after: int, first: int, reached: int, code: int, wall: float) -> JudgedRunner:
    start = 100.0 * seq
    return JudgedRunner(
        job_id=str(40 + seq),
        seq=seq,
        iter_before=before,
        iter_after=after,
        iter_first=first,
        iter_reached=reached,
        app_exit_code=code,
        exit_code=code if code == 0 else 99,
        verdict=Verdict.COMPLETE if code == 0 else Verdict.CONTINUE,
        start=start,
        end=start + wall,
        recorded=True,
        stop_sent=start + wall - 5.0 if code else None,  # killed by the stop signal, 5 s before its end
        stop_to_exit=5.0 if code else None,
    )


# nanoGPT's shape on the local backend: the counter checkpointed every 5 steps, the app killed by
# the stop signal between two saves (exit 143); runner 1 lost 3 iterations, runner 2 lost 5
NANOGPT_LIKE = [
    _judged(1, 0, 10, 0, 12, 143, 60.0),
    _judged(2, 10, 20, 10, 24, 143, 60.0),
    _judged(3, 20, 30, 20, 29, 0, 40.0),
]

PRINTED = """\
accounting unavailable: the chain ran on the local backend; usage from the chain's own records
chain chain-0a1b2c: 3 runner(s), local backend
# job   node state exit counter wait alloc redone  lost
───────────────────────────────────────────────────────
1 41    -    -     99      0→10    - 1m00s   0.0s  5.0s
2 42    -    -     99     10→20    - 1m00s  12.7s  5.0s
3 43    -    -     0      20→30    - 40.0s  18.3s  0.0s

  total                     +30 0.0s 2m40s  31.0s 10.0s
state completed (app finished at 30); counter 30/30
allocated 2m40s = new work 1m59s + redone 31.0s + lost 10.0s (efficiency 74.3%)
queue wait 0.0s; cpu -; max RSS -; stop→exit 10.0s
redone 8 it (31.0s), from the runner records
driver: 0 submitter jobs
"""


def _no_slurm(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"a local chain's report ran {argv}")


def test_the_printed_redone_and_lost_columns_add_up_to_the_allocation_line(tmp_path: Path) -> None:
    chain = tmp_path / ".chain"
    chain.mkdir()
    state = {"chain_id": "chain-0a1b2c", "state": "completed", "reason": "app finished at 30", "backend": "local"}
    (chain / "state.json").write_text(json.dumps({**state, "workdir": str(tmp_path), "iteration": 30}))
    (chain / "settings.json").write_text(json.dumps({"max_iter": 30}))
    (chain / "runners.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in NANOGPT_LIKE))
    out = io.StringIO()
    console = Console(file=out, width=120, highlight=False, markup=False, emoji=False, color_system=None)
    make_report(chain, backends=backends(_no_slurm), settle=0, console=console)
    assert "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n" == PRINTED
