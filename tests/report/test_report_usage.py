"""Usage: sacct parsing on literal 22.05 output, the batched call, rows, totals, make_report."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from _backends import backends, slurm_backend
from _report_data import (
    ACCOUNTING_DISABLED,
    ITER_LOG_RESTART,
    SACCT_CHAIN,
    SACCT_MIXED,
    SACCT_MIXED_X,
    write_chain,
)
from _runners import recorded

from chain.backends.slurm import cli
from chain.backends.slurm.parse import (
    parse_cpu_time,
    parse_sacct_usage,
    parse_size,
    parse_slurm_timestamp,
)
from chain.core.decision import Verdict
from chain.core.records import RunnerView
from chain.core.retry import RetryPolicy
from chain.reporting.metrics import Redone
from chain.reporting.printed import redone_line
from chain.reporting.report import make_report
from chain.reporting.usage import (
    COLUMNS,
    SLURM_COLUMNS,
    build_rows,
    fetch_usage,
    load_runners,
    usage_totals,
)
from chain.store import ChainDir


class FakeSacct:
    """Stands in for subprocess.run: answers from a list of (rc, stdout, stderr)."""

    def __init__(self, *answers: tuple[int, str, str]) -> None:
        self.answers = list(answers)
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        rc, out, err = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        return subprocess.CompletedProcess(list(argv), rc, out, err)


def never(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"no Slurm call expected: {argv}")


# --- parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("00:00.620", 0.62),
        ("00:00:00", 0.0),
        ("01:02:03", 3723.0),
        ("1-02:03:04", 93784.0),
        ("12:34.5", 754.5),
        ("", None),
        ("INVALID", None),
    ],
)
def test_parse_cpu_time(text: str, seconds: float | None) -> None:
    assert parse_cpu_time(text) == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(
    "text,size",
    [
        ("98492K", 98492 * 1024),
        ("0", 0),
        ("1.5G", int(1.5 * 2**30)),
        ("12M", 12 * 2**20),
        ("", None),
    ],
)
def test_parse_size(text: str, size: int | None) -> None:
    assert parse_size(text) == size


def test_parse_sacct_usage_jobs_and_steps() -> None:
    jobs = parse_sacct_usage(SACCT_MIXED)
    assert sorted(jobs) == ["22", "23", "24", "41"]
    j22 = jobs["22"]
    assert (j22.state, j22.exit_code, j22.node, j22.elapsed) == ("COMPLETED", "0:0", "vm", 35.0)
    assert j22.cpu == pytest.approx(0.495)  # the job line sums its steps
    assert j22.max_rss == 98492 * 1024  # max over .batch and .0
    assert j22.queue_wait == 0.0
    assert j22.end == parse_slurm_timestamp("2026-11-29T07:52:50")
    assert (jobs["23"].state, jobs["23"].exit_code, jobs["23"].elapsed) == ("TIMEOUT", "0:0", 63.0)
    assert jobs["24"].state == "CANCELLED by 0" and jobs["24"].final
    pending = jobs["41"]
    assert (pending.start, pending.end, pending.node, pending.queue_wait, pending.final) == (
        None,
        None,
        "",
        None,
        False,
    )


def test_parse_sacct_usage_with_x_has_no_steps() -> None:
    jobs = parse_sacct_usage(SACCT_MIXED_X)
    assert jobs["22"].max_rss is None and jobs["22"].cpu == 0.0 and jobs["22"].elapsed == 35.0


def test_parse_sacct_usage_chain() -> None:
    jobs = parse_sacct_usage(SACCT_CHAIN)
    assert [(j.job_id, j.state, j.exit_code, j.elapsed) for j in jobs.values()] == [
        ("36", "FAILED", "99:0", 6.0),
        ("37", "FAILED", "99:0", 6.0),
        ("38", "COMPLETED", "0:0", 5.0),
    ]
    assert jobs["36"].queue_wait == 3.0 and jobs["38"].queue_wait == 2.0


# --- the Slurm call ------------------------------------------------------------------


def test_fetch_usage_one_batched_call() -> None:
    run = FakeSacct((0, SACCT_CHAIN, ""))
    found, note = fetch_usage(slurm_backend(run), ["36", "37", "38", "37"], ended=["36", "37", "38"], settle=0)
    assert note is None and sorted(found) == ["36", "37", "38"]
    assert len(run.calls) == 1
    argv = run.calls[0]
    assert argv[0] == "sacct" and "-X" not in argv and "-P" in argv and argv[argv.index("-j") + 1] == "36,37,38"


def test_fetch_usage_batches_long_chains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "SACCT_BATCH", 2)
    run = FakeSacct((0, SACCT_CHAIN, ""))
    found, _ = fetch_usage(slurm_backend(run), ["36", "37", "38"], settle=0)
    assert [c[c.index("-j") + 1] for c in run.calls] == ["36,37", "38"]
    assert len(found) == 3


def test_fetch_usage_accounting_disabled() -> None:
    run = FakeSacct((1, "", ACCOUNTING_DISABLED))
    found, note = fetch_usage(slurm_backend(run), ["36"], settle=0)
    assert found == {} and note == "accounting unavailable: Slurm accounting storage is disabled"
    assert len(run.calls) == 1  # not a transient error: no retry


def test_fetch_usage_waits_for_records_arriving_late() -> None:
    late = SACCT_CHAIN.replace(
        "38|COMPLETED|0:0|2026-11-29T07:54:49|2026-11-29T07:54:51|2026-11-29T07:54:56",
        "38|RUNNING|0:0|2026-11-29T07:54:49|2026-11-29T07:54:51|Unknown",
    )
    without = "\n".join(line for line in SACCT_CHAIN.splitlines() if not line.startswith("38"))
    run = FakeSacct((0, without, ""), (0, late, ""), (0, SACCT_CHAIN, ""))
    clock = iter(range(100))
    found, note = fetch_usage(
        slurm_backend(run),
        ["36", "37", "38"],
        ended=["36", "37", "38"],
        settle=10,
        sleep=lambda s: None,
        clock=lambda: float(next(clock)),
    )
    assert len(run.calls) == 3 and note is None and found["38"].state == "COMPLETED"


def test_fetch_usage_gives_up_after_settle() -> None:
    run = FakeSacct((0, SACCT_MIXED, ""))
    clock = iter(range(0, 1000, 5))
    found, note = fetch_usage(
        slurm_backend(run),
        ["22", "41"],
        ended=["41"],
        settle=10,
        sleep=lambda s: None,
        clock=lambda: float(next(clock)),
    )
    assert found["41"].state == "PENDING" and note is not None and "41" in note
    assert len(run.calls) == 2  # deadline 0 + 10: asked at 5, again at 10, then gave up


def test_fetch_usage_retries_transient_errors() -> None:
    run = FakeSacct((1, "", "sacct: error: Socket timed out on send/recv operation"), (0, SACCT_CHAIN, ""))
    policy = RetryPolicy(attempts=3, sleep=lambda s: None)
    found, note = fetch_usage(slurm_backend(run, retry=policy), ["36"], settle=0)
    assert note is None and "36" in found and len(run.calls) == 2


# --- rows and totals -------------------------------------------------------------------


def test_rows_and_totals_add_up(tmp_path: Path) -> None:
    runners = load_runners(ChainDir(write_chain(tmp_path)))
    none_redone = Redone(iterations=0, seconds=0.0, by_job={}, restarts=0)
    rows = build_rows(runners, parse_sacct_usage(SACCT_CHAIN), none_redone)
    assert [r["job_id"] for r in rows] == ["36", "37", "38"]
    for row in rows:
        assert row["allocated_s"] == row["elapsed_s"]
        assert row["allocated_s"] == pytest.approx(row["useful_s"] + row["lost_s"], abs=1e-9)
        assert 0 <= row["useful_s"] <= row["allocated_s"]
    r1 = rows[0]
    assert (r1["slurm_state"], r1["slurm_exit_code"], r1["node"], r1["queue_wait_s"], r1["cpu_s"]) == (
        "FAILED",
        "99:0",
        "vm",
        3.0,
        0.62,
    )
    assert (r1["iter_before"], r1["iter_after"], r1["iterations"], r1["runner_exit_code"]) == (0, 11, 11, 99)
    assert r1["useful_s"] == pytest.approx(1795938881.5052211 - 1795938875.6853447, abs=1e-3)
    assert (rows[0]["redone_iterations"], rows[0]["redone_s"]) == (0, 0.0)
    t = usage_totals(rows, none_redone)
    assert t["allocated_s"] == 17.0 and t["queue_wait_s"] == 5.0 and t["iterations"] == 30
    assert t["allocated_s"] == pytest.approx(t["useful_s"] + t["lost_s"])
    assert t["useful_s"] == pytest.approx(sum(r["useful_s"] for r in rows))
    assert t["efficiency"] == pytest.approx(t["useful_s"] / t["allocated_s"], abs=1e-4)


def test_useful_is_capped_at_the_allocation() -> None:
    # sacct's whole seconds may be shorter than the runner's own clock
    acct = parse_sacct_usage(SACCT_CHAIN.replace("|6|00:00.620", "|5|00:00.620"))
    rows = build_rows([recorded()[0]], acct)
    assert rows[0]["allocated_s"] == 5.0 and rows[0]["useful_s"] == 5.0 and rows[0]["lost_s"] == 0.0


def test_rows_without_accounting_use_own_records() -> None:
    runners = [
        dataclasses.replace(r, submitted=s) for r, s in zip(recorded(), (1795938872.620649, None, 1795938889.1779118))
    ]
    rows = build_rows(runners, {})
    for row in rows:
        assert all(row[c] is None for c in SLURM_COLUMNS if c not in ("queue_wait_s", "node"))
        assert row["node"] == "vm"  # the runner's own record has its host
        assert row["allocated_s"] == pytest.approx(row["useful_s"] + row["lost_s"])
    assert rows[0]["queue_wait_s"] == pytest.approx(1795938875.6853447 - 1795938872.620649, abs=1e-3)
    assert rows[1]["queue_wait_s"] is None
    assert rows[0]["redone_iterations"] is None  # no iteration log


def test_runner_without_record_or_start() -> None:
    rows = build_rows([RunnerView(job_id="99", seq=4, submitted=5.0)], {})
    t = usage_totals(rows)
    assert rows[0]["useful_s"] == 0.0 and rows[0]["allocated_s"] is None and rows[0]["lost_s"] is None
    assert (t["allocated_s"], t["useful_s"], t["lost_s"]) == (0.0, 0.0, 0.0) and t["efficiency"] is None


def test_load_runners_merges_ids_records_and_judgements(tmp_path: Path) -> None:
    chain = write_chain(tmp_path)
    (chain / "worker_ids.txt").write_text("36\n37\n38\n39\n")  # 39: submitted, not started
    runners = load_runners(ChainDir(chain))
    assert [r.job_id for r in runners] == ["36", "37", "38", "39"]
    assert runners[0].verdict == "continue" and runners[0].host == "vm" and runners[0].judged
    assert runners[0].submitted == 1795938872.620649 and runners[0].ended
    assert runners[3] == RunnerView(job_id="39", judged=False)


# --- make_report ---------------------------------------------------------------------


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_make_report_with_accounting(chain_dir: Path) -> None:
    run = FakeSacct((0, SACCT_CHAIN, ""))
    paths = make_report(chain_dir, echo=False, backends=backends(run), settle=0)
    assert [p.name for p in paths] == ["usage.csv", "summary.json", "progress.png"]
    rows = _csv(paths[0])
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["job_id"], r["slurm_state"], r["slurm_exit_code"], r["elapsed_s"]) for r in rows] == [
        ("36", "FAILED", "99:0", "6.0"),
        ("37", "FAILED", "99:0", "6.0"),
        ("38", "COMPLETED", "0:0", "5.0"),
    ]
    summary = json.loads(paths[1].read_text())
    assert summary["accounting"] is True and summary["notes"] == []
    t = summary["totals"]
    assert t["allocated_s"] == 17.0 and t["allocated_s"] == pytest.approx(t["useful_s"] + t["lost_s"])
    assert t["redone_iterations"] == 0 and t["runners"] == 3
    # a completed chain: no rate or ETA (as chain status), but the mean rate over its span
    assert summary["metrics"]["eta_seconds"] is None and summary["metrics"]["rate_per_hour"] is None
    assert summary["mean_rate_per_hour"] == pytest.approx(30 * 3600 / summary["span_s"], rel=1e-4)
    assert (summary["chain_id"], summary["iteration"], summary["max_iter"]) == ("chain-effb11", 30, 30)


def test_make_report_accounting_disabled(chain_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = make_report(chain_dir, echo=True, backends=backends(FakeSacct((1, "", ACCOUNTING_DISABLED))), settle=0)
    out = capsys.readouterr().out
    assert "accounting unavailable: Slurm accounting storage is disabled" in out.splitlines()[0]
    rows = _csv(paths[0])
    own = ("queue_wait_s", "node")  # our clock and the runner's record fill these without sacct
    assert len(rows) == 3 and all(r[c] == "" for r in rows for c in SLURM_COLUMNS if c not in own)
    assert [r["node"] for r in rows] == ["vm"] * 3
    summary = json.loads(paths[1].read_text())
    assert summary["accounting"] is False and len(summary["notes"]) == 1
    t = summary["totals"]
    assert t["allocated_s"] == pytest.approx(t["useful_s"] + t["lost_s"]) and t["allocated_s"] > 0


def test_make_report_local_backend_makes_no_slurm_call(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, backend="local", log=ITER_LOG_RESTART)
    paths = make_report(chain, echo=False, backends=backends(never), settle=0)
    summary = json.loads(paths[1].read_text())
    assert summary["notes"][0].startswith("accounting unavailable: the chain ran on the local backend")
    # the log's jobs (50, 51) are not the records' (36-38): redone in the log, in no runner's
    # allocation: the rows and their totals show 0, the printed line says where the 3 are
    totals = summary["totals"]
    assert summary["work_redone"]["iterations"] == 3 and (totals["redone_iterations"], totals["redone_s"]) == (0, 0)
    assert {(r["redone_iterations"], r["redone_s"]) for r in _csv(paths[0])} == {("0", "0.0")}
    assert redone_line(summary["work_redone"], totals) == (
        "redone 0 it (0.0s), from the iterations.log; 3 more by jobs not of this chain"
    )


def test_make_report_without_iteration_log(tmp_path: Path) -> None:
    paths = make_report(
        write_chain(tmp_path, log=None), echo=False, backends=backends(FakeSacct((0, SACCT_CHAIN, ""))), settle=0
    )
    summary = json.loads(paths[1].read_text())
    # no log: from the runner records, whose apps all saved and exited by themselves
    assert summary["work_redone"]["source"] == "runner records" and summary["work_redone"]["unknown"] == []
    assert summary["totals"]["redone_iterations"] == 0 and summary["totals"]["efficiency"] is not None
    assert (tmp_path / ".chain" / "report" / "progress.png").stat().st_size > 1000


def test_make_report_on_an_empty_chain(tmp_path: Path) -> None:
    chain = tmp_path / ".chain"
    chain.mkdir()
    (chain / "state.json").write_text(json.dumps({"chain_id": "chain-000000", "backend": "slurm"}))
    paths = make_report(chain, echo=True, backends=backends(never), settle=0)
    assert _csv(paths[0]) == [] and json.loads(paths[1].read_text())["totals"]["runners"] == 0


def test_a_running_runner_is_useful_so_far() -> None:
    live = RunnerView(job_id="60", start=100.0, iter_before=5)
    acct = parse_sacct_usage("60|RUNNING|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|Unknown|42|00:00:00|vm|\n")
    row = build_rows([live], acct, now=141.0)[0]
    assert (row["allocated_s"], row["useful_s"], row["lost_s"]) == (42.0, 41.0, 1.0)
    row = build_rows([live], {}, now=141.0)[0]
    assert (row["allocated_s"], row["useful_s"], row["lost_s"]) == (41.0, 41.0, 0.0)


def test_report_prints_error_text_literally(chain_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An sacct error (or a job name) with brackets is text, not rich markup."""
    message = "sacct: error: [/x] bad [bold]thing"
    make_report(chain_dir, echo=True, backends=backends(FakeSacct((1, "", message))), settle=0)
    out = capsys.readouterr().out
    assert "[/x] bad [bold]thing" in out


def test_load_runners_reads_old_and_broken_lines_and_records(tmp_path: Path) -> None:
    """A line of an earlier version, a field of the wrong type (unknown; the
    line's other fields and the record's value are used), a torn last line;
    a record with a bad field keeps its valid ones."""
    chain = write_chain(tmp_path)
    with (chain / "runners.jsonl").open("a") as fh:
        fh.write(
            '{"job_id": "39", "seq": "x", "start": 1795938897.0, "end": 1795938899.5, "iter_before": 30, '
            '"iter_after": 30, "verdict": "stop", "reason": null, "unknown_key": 1}\n'
        )
        fh.write('[1, 2]\n{"job_id": "40", "state": "FAILED", "exit_code": 2, "end": "late"}\n{"job_id": "41", "se')
    (chain / "runners" / "40.json").write_text(
        json.dumps(
            {
                "job_id": "40",
                "start": 1795938900.0,
                "end": 1795938910.0,
                "host": "n1.x",
                "status": "ended",
                "iter_before": 30,
                "iter_after": 31,
                "stop_sent": "soon",
            }
        )
    )
    runners = load_runners(ChainDir(chain))
    assert [r.job_id for r in runners] == ["36", "37", "38", "39", "40"]
    assert runners[3] == RunnerView(
        job_id="39",
        start=1795938897.0,
        end=1795938899.5,
        iter_before=30,
        iter_after=30,
        verdict=Verdict.STOP,
        reason="",
        judged=True,
    )
    assert runners[4] == RunnerView(
        job_id="40",
        host="n1.x",
        start=1795938900.0,
        end=1795938910.0,
        iter_before=30,
        iter_after=31,
        exit_code=2,
        verdict=None,  # the line does not say
        reason="",
        ended=True,
        judged=True,
    )
    rows = build_rows(runners, {})
    assert [(r["seq"], r["node"], r["allocated_s"], r["iterations"]) for r in rows[3:]] == [
        (None, None, 2.5, 0),
        (None, "n1", 10.0, 1),
    ]
