"""Figures that are true: efficiency without progress, no rate/ETA once
ended, the chain's state in summary.json, the driver's allocation, and a
printed report that fits 80 columns with its node column filled."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _backends import backends
from _report_data import (
    DRIVER_RUNNERS,
    DRIVER_SUBMITTERS,
    LOCAL_SUBMITTER,
    SACCT_CHAIN,
    SACCT_DRIVER,
    SACCT_LONG,
    write_chain,
    write_long_chain,
)
from _runners import judged
from rich.console import Console

from chain.backends.local.backend import local_usage
from chain.backends.local.spool import JobRecord
from chain.backends.slurm.parse import parse_sacct_usage
from chain.core.model import ChainState
from chain.core.records import RunnerView
from chain.reporting.metrics import chain_metrics, efficiency, redone_from_runners
from chain.reporting.printed import driver_line
from chain.reporting.report import final_state, make_report
from chain.reporting.usage import build_rows, driver_usage, usage_totals
from chain.store import ChainStatus


class FakeSacct:
    def __init__(self, out: str) -> None:
        self.out = out
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, self.out, "")


def never(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"no Slurm call expected: {argv}")


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=80, highlight=False, markup=False, emoji=False, color_system=None), buf


def _set_state(chain: Path, **changes: Any) -> None:
    state = json.loads((chain / "state.json").read_text())
    state.update(changes)
    (chain / "state.json").write_text(json.dumps(state))


# --- 1. no useful work is 0 %, not 100 % -------------------------------------------------

# runners.jsonl of a chain whose app never got past its checkpoint at 40: each
# runner ran the app for its whole allocation and ended where it began.
STALLED = """\
{"end": 1000.0, "exit_code": 1, "iter_after": 40, "iter_before": 40, "job_id": "70", "reason": "stopped without advance (40->40)", "recorded": true, "seq": 1, "start": 400.0, "state": "COMPLETED", "stop_to_exit": 5.0, "submitted": 390.0, "verdict": "continue"}
{"end": 1700.0, "exit_code": 1, "iter_after": 40, "iter_before": 40, "job_id": "71", "reason": "stopped without advance (40->40)", "recorded": true, "seq": 2, "start": 1100.0, "state": "COMPLETED", "stop_to_exit": 5.0, "submitted": 1000.0, "verdict": "stop"}
"""


def _stalled() -> list[RunnerView]:
    runners: list[RunnerView] = judged(STALLED)
    return runners


def test_no_progress_is_zero_efficiency() -> None:
    runners = _stalled()
    m = chain_metrics(runners, 40, 100, now=1800.0)
    assert m["efficiency"] is not None and m["efficiency"] == 0.0
    rows = build_rows(runners, {})
    assert [r["useful_s"] for r in rows] == [0.0, 0.0]
    assert [r["lost_s"] for r in rows] == [r["allocated_s"] for r in rows] == [600.0, 600.0]
    t = usage_totals(rows, redone_from_runners(runners))
    assert t["efficiency"] is not None and t["efficiency"] == 0.0


def test_efficiency_counts_only_the_runners_that_advanced() -> None:
    advanced = RunnerView(start=0.0, end=100.0, stop_to_exit=10.0, iter_before=0, iter_after=20, app_exit_code=99)
    assert efficiency([advanced, *_stalled()]) == pytest.approx(90 / 1300)


def test_efficiency_is_unknown_only_without_allocation() -> None:
    assert efficiency([]) is None
    assert efficiency([RunnerView(start=5.0, end=5.0, iter_before=1, iter_after=1)]) is None
    assert usage_totals(build_rows([], {}))["efficiency"] is None


def test_report_of_a_stalled_chain_says_zero(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, backend="local", log=None)
    (chain / "runners.jsonl").write_text(STALLED)
    (chain / "worker_ids.txt").write_text("70\n71\n")
    for record in (chain / "runners").iterdir():
        record.unlink()
    _set_state(chain, state="stopped", reason="no progress in 2 runners", iteration=40)
    console, buf = _console()
    paths = make_report(chain, backends=backends(never), settle=0, console=console)
    summary = json.loads(paths[1].read_text())
    assert summary["totals"]["efficiency"] == 0.0 and summary["metrics"]["efficiency"] == 0.0
    assert "(efficiency 0.0%)" in buf.getvalue()


# --- 2. an ended chain has no rate or ETA --------------------------------------------------


@pytest.mark.parametrize("state", list(ChainState))
def test_rate_and_eta_only_while_the_chain_runs(state: ChainState) -> None:
    runners = judged()[:2]  # 22 of 30 done
    live = chain_metrics(runners, 22, 30, now=1795938890.0)
    m = chain_metrics(runners, 22, 30, now=1795938890.0, ended=state.ended)
    assert live["rate_per_hour"] and live["eta_seconds"]
    assert m["efficiency"] == live["efficiency"] is not None
    if state.ended:
        assert m["rate_per_hour"] is None and m["eta_seconds"] is None
    else:
        assert m == live


# --- 3. summary.json holds the chain's state -------------------------------------------------


@pytest.mark.parametrize(
    "state,reason,iteration",
    [
        ("completed", "reached MAX_ITER=30", 30),
        ("failed", "runner 3 (job 38) failed: app exited 2", 22),
        ("cancelled", "cancelled by chain cancel", 22),
        ("running", "", 22),
    ],
)
def test_summary_has_the_state_json_state(chain_dir: Path, state: str, reason: str, iteration: int) -> None:
    _set_state(chain_dir, state=state, reason=reason, iteration=iteration)
    paths = make_report(chain_dir, echo=False, backends=backends(FakeSacct(SACCT_CHAIN)), settle=0, environ={})
    summary = json.loads(paths[1].read_text())
    assert (summary["state"], summary["reason"], summary["iteration"], summary["max_iter"]) == (
        state,
        reason,
        iteration,
        30,
    )
    ended = ChainState(state).ended
    assert (summary["metrics"]["eta_seconds"] is None) == ended


HOOK_ENV = {"CHAIN_ID": "chain-effb11", "CHAIN_STATE": "completed", "CHAIN_REASON": "reached MAX_ITER=30"}


@pytest.mark.parametrize(
    "saved,environ,expected",
    [
        # the report hook of a completing chain: state.json still says running
        ("running", HOOK_ENV, ("completed", "reached MAX_ITER=30")),
        # not this chain's hook, or no valid state told: state.json's
        ("running", dict(HOOK_ENV, CHAIN_ID="chain-000000"), ("running", "")),
        ("running", dict(HOOK_ENV, CHAIN_STATE="done"), ("running", "")),
        ("running", {}, ("running", "")),
        # an ended state.json is the truth (a failing chain saves it before its report hook)
        ("failed", HOOK_ENV, ("failed", "")),
    ],
)
def test_final_state(saved: str, environ: dict[str, str], expected: tuple[str, str]) -> None:
    status = ChainStatus(chain_id="chain-effb11", state=ChainState(saved))
    assert final_state(status, environ) == expected
    assert final_state(None, environ) == ("", "")


def test_report_hook_of_a_completing_chain_has_the_final_state(chain_dir: Path) -> None:
    _set_state(chain_dir, state="running", reason="")
    paths = make_report(chain_dir, echo=False, backends=backends(FakeSacct(SACCT_CHAIN)), settle=0, environ=HOOK_ENV)
    summary = json.loads(paths[1].read_text())
    assert (summary["state"], summary["reason"]) == ("completed", "reached MAX_ITER=30")
    assert summary["metrics"]["rate_per_hour"] is None and summary["metrics"]["eta_seconds"] is None


# --- 4. the driver: submitter jobs' allocation -------------------------------------------------


def test_parse_alloc_cpus() -> None:
    jobs = parse_sacct_usage(SACCT_DRIVER)
    assert (jobs["1"].alloc_cpus, jobs["1"].elapsed, jobs["1"].cpu_seconds) == (2, 6.0, 12.0)
    assert (jobs["2"].alloc_cpus, jobs["2"].elapsed, jobs["2"].cpu_seconds) == (1, 25.0, 25.0)
    assert jobs["2"].max_rss == 20128 * 1024
    # output without the AllocCPUS field (captured before it was asked for)
    assert parse_sacct_usage(SACCT_CHAIN)["36"].alloc_cpus is None
    assert parse_sacct_usage(SACCT_CHAIN)["36"].cpu_seconds is None


def test_driver_usage_from_one_sacct_answer() -> None:
    d = driver_usage(DRIVER_SUBMITTERS, DRIVER_RUNNERS, parse_sacct_usage(SACCT_DRIVER), "sacct")
    # submitters 2, 6, 10: 1 CPU x (25 + 25 + 7) s; runners: 2 CPUs x (7 x 6 + 2) s
    assert (d.accounted, d.elapsed_s, d.cpu_s) == (3, 57.0, 57.0)
    assert (d.runners, d.runners_accounted, d.runner_cpu_s) == (8, 8, 88.0)
    assert d.ratio == pytest.approx(57 / 88, abs=1e-4)
    assert d.to_json()["jobs"] == 3 and d.source == "sacct"


def test_driver_usage_incomplete_or_without_cpus() -> None:
    acct = parse_sacct_usage(SACCT_DRIVER)
    del acct["6"]
    d = driver_usage(DRIVER_SUBMITTERS, DRIVER_RUNNERS, acct, "sacct")
    assert (d.accounted, d.cpu_s, d.ratio) == (2, 32.0, None)  # a partial sum is no ratio
    old = driver_usage(["35"], ["36", "37", "38"], parse_sacct_usage(SACCT_CHAIN), "sacct")
    assert (old.accounted, old.cpu_s, old.runner_cpu_s, old.ratio) == (0, None, None, None)
    assert old.source == ""


@pytest.mark.parametrize(
    "driver,expected",
    [
        (
            {"jobs": 3, "accounted": 3, "elapsed_s": 57.0, "cpu_s": 57.0, "runner_cpu_s": 88.0, "ratio": 0.6477},
            "driver: 3 submitter jobs held 57 CPU-s (57.0s elapsed) = 64.8% of the runners' 88 CPU-s",
        ),
        (
            {"jobs": 1, "accounted": 1, "elapsed_s": 12.8, "cpu_s": None, "runner_cpu_s": None, "ratio": None},
            "driver: 1 submitter job, 12.8s elapsed; CPU-seconds unknown (no allocated CPUs recorded)",
        ),
        (
            {"jobs": 2, "accounted": 0, "elapsed_s": None, "cpu_s": None, "runner_cpu_s": None, "ratio": None},
            "driver: 2 submitter jobs, allocation unknown (no accounting record)",
        ),
    ],
)
def test_driver_line(driver: dict[str, Any], expected: str) -> None:
    assert driver_line(driver) == expected


def _driver_chain(root: Path) -> Path:
    chain = root / ".chain"
    chain.mkdir()
    (chain / "state.json").write_text(
        json.dumps(
            {
                "chain_id": "chain-c0ffee",
                "state": "completed",
                "reason": "reached MAX_ITER=80",
                "backend": "slurm",
                "workdir": str(root),
                "iteration": 80,
                "submitter_job_id": "10",
                "submitter_cycle": 2,
            }
        )
    )
    (chain / "worker_ids.txt").write_text("\n".join(DRIVER_RUNNERS) + "\n")
    (chain / "submitter_ids.txt").write_text("\n".join(DRIVER_SUBMITTERS) + "\n")
    return chain


def test_report_accounts_the_submitters_in_the_same_sacct_call(tmp_path: Path) -> None:
    # the current submitter (10) is still running the report hook: not waited for
    out = SACCT_DRIVER.replace(
        "10|COMPLETED|0:0|2026-12-01T13:00:37|2026-12-01T13:00:40|2026-12-01T13:00:47|7|",
        "10|RUNNING|0:0|2026-12-01T13:00:37|2026-12-01T13:00:40|Unknown|7|",
    )
    assert out != SACCT_DRIVER
    run = FakeSacct(out)
    console, buf = _console()
    paths = make_report(_driver_chain(tmp_path), backends=backends(run), settle=30, console=console)
    assert len(run.calls) == 1
    argv = run.calls[0]
    assert argv[argv.index("-j") + 1].split(",") == DRIVER_RUNNERS + DRIVER_SUBMITTERS
    summary = json.loads(paths[1].read_text())
    d = summary["driver"]
    assert (d["jobs"], d["accounted"], d["cpu_s"], d["runner_cpu_s"], d["source"]) == (3, 3, 57.0, 88.0, "sacct")
    assert d["ratio"] == pytest.approx(57 / 88, abs=1e-4)
    assert summary["totals"]["runners"] == 8  # the submitters are no rows of usage.csv
    assert paths[0].read_text().count("\n") == 1 + 8
    assert "driver: 3 submitter jobs held 57 CPU-s" in buf.getvalue()


def test_local_submitter_record() -> None:
    record = JobRecord.from_json(dict(LOCAL_SUBMITTER))
    u = local_usage(record, now=1796130100.0)
    assert u.elapsed == pytest.approx(LOCAL_SUBMITTER["end"] - LOCAL_SUBMITTER["start"])
    assert (u.node, u.exit_code, u.alloc_cpus, u.cpu_seconds) == ("vm", "0:0", None, None)
    running = JobRecord.from_json(dict(LOCAL_SUBMITTER, state="RUNNING", end=1796130295.0, exit_code=None))
    u = local_usage(running, now=1796130100.0)
    assert u.end is None and u.elapsed == pytest.approx(1796130100.0 - 1796130055.4503417)
    pending = JobRecord.from_json(dict(LOCAL_SUBMITTER, state="PENDING", start=None, end=None, exit_code=None))
    assert local_usage(pending, now=1796130100.0).elapsed == 0.0


def test_report_on_the_local_backend_reads_its_job_records(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, backend="local")
    (chain / "submitter_ids.txt").write_text("2\n")
    (chain / "local-jobs" / "jobs").mkdir(parents=True)
    (chain / "local-jobs" / "jobs" / "2.json").write_text(json.dumps(LOCAL_SUBMITTER))
    console, buf = _console()
    paths = make_report(chain, backends=backends(never), settle=0, console=console)
    d = json.loads(paths[1].read_text())["driver"]
    elapsed = LOCAL_SUBMITTER["end"] - LOCAL_SUBMITTER["start"]
    assert (d["jobs"], d["accounted"], d["cpu_s"], d["ratio"], d["source"]) == (1, 1, None, None, "local backend")
    assert d["elapsed_s"] == pytest.approx(elapsed, abs=1e-3)
    assert f"driver: 1 submitter job, {elapsed:.1f}s elapsed; CPU-seconds unknown" in buf.getvalue()


# --- 5. 80 columns, node filled -------------------------------------------------------------------


def _runner_lines(text: str, job_ids: list[str]) -> dict[str, str]:
    found = {job: [line for line in text.splitlines() if f" {job} " in line] for job in job_ids}
    assert all(len(lines) == 1 for lines in found.values()), found
    return {job: lines[0] for job, lines in found.items()}


@pytest.mark.parametrize("backend", ["slurm", "local"])
def test_printed_report_fits_80_columns_with_the_node(tmp_path: Path, backend: str) -> None:
    jobs = ["41234567", "41234568", "41234569"]
    console, buf = _console()
    run = FakeSacct(SACCT_LONG) if backend == "slurm" else never
    make_report(write_long_chain(tmp_path, backend=backend), backends=backends(run), settle=0, console=console)
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # nothing squeezed out of a cell
    lines = _runner_lines(text, jobs)
    for line in lines.values():
        assert "node0123" in line.split() and ".cluster" not in line, line
    assert "100000→100480" in lines[jobs[0]] and "100700→101000" in lines[jobs[2]]
    if backend == "slurm":
        assert lines[jobs[0]].split()[3:5] == ["TIMEOUT", "124"]
        assert lines[jobs[1]].split()[3] == "CANCELLED"  # "CANCELLED by 12345" in sacct
        assert "23h59m" in lines[jobs[0]]  # 86340 s allocated
        assert any(line.startswith("driver: 1 submitter job held") for line in text.splitlines())


def test_node_comes_from_sacct_else_the_runner_record() -> None:
    runners = [dataclasses.replace(r, host="vm.example.org") for r in judged()]
    acct = parse_sacct_usage(SACCT_CHAIN.replace("|vm|", "|node7|"))
    assert {r["node"] for r in build_rows(runners, acct)} == {"node7"}
    assert {r["node"] for r in build_rows(runners, {})} == {"vm"}
    assert {r["node"] for r in build_rows([dataclasses.replace(r, host="") for r in runners], {})} == {None}
