"""Usage of a chain's runners: per-runner rows, totals, the driver.

The accounting comes from the chain's backend (``Backend.usage``: sacct,
pyslurm's slurmdbd API, or the local backend's own job records);
``fetch_usage`` asks it and waits for the records of just-ended jobs. The
rest is pure: ``build_rows``, ``usage_totals`` and ``driver_usage`` take the
chain's own records and the accounting as data. The *driver* is the chain's
submitter jobs: their allocation is a cost of the chain beside the runners'.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chain.backends.base import Backend, JobUsage
from chain.core.records import JudgedRunner, RunnerView
from chain.errors import SchedulerError
from chain.reporting.metrics import Redone, redone_part, runner_wall, useful_seconds
from chain.store import ChainDir

COLUMNS = (
    "seq",
    "job_id",
    # from the accounting (empty without it, but for node and queue wait: the
    # runner's own record has its host and our clock its submission and start)
    "slurm_state",
    "slurm_exit_code",
    "node",
    "submit",
    "start",
    "end",
    "queue_wait_s",
    "elapsed_s",
    "alloc_cpus",
    "cpu_s",
    "max_rss_bytes",
    # from the chain's own records
    "runner_exit_code",
    "app_exit_code",
    "iter_before",
    "iter_after",
    "iterations",
    "redone_iterations",
    "allocated_s",
    "useful_s",
    "redone_s",
    "lost_s",
    "stop_to_exit_s",
    "verdict",
    "reason",
)
SLURM_COLUMNS = COLUMNS[COLUMNS.index("slurm_state") : COLUMNS.index("max_rss_bytes") + 1]


# --- the backend's accounting -------------------------------------------------------


def fetch_usage(
    backend: Backend,
    job_ids: Sequence[str],
    *,
    ended: Iterable[str] = (),
    settle: float = 15.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, JobUsage], str | None]:
    """``backend.usage`` of ``job_ids``: (usage by job id, note or None).

    Records reach slurmdbd asynchronously: while a job in ``ended`` is
    missing or not yet final, ask again (up to ``settle`` seconds). A failure
    (accounting disabled or down after the backend's retries, sacct missing)
    returns ({}, the reason).
    """
    ids = [j for j in dict.fromkeys(job_ids) if j]
    if not ids:
        return {}, None
    want = set(ended) & set(ids)
    deadline = clock() + settle
    found: dict[str, JobUsage] = {}
    while True:
        try:
            found.update(backend.usage(ids))
        except SchedulerError as exc:  # AccountingUnavailable, or a request that kept failing
            return {}, f"accounting unavailable: {exc}"
        late = [j for j in want if j not in found or not found[j].final]
        if not late or clock() >= deadline:
            note = (
                (f"{backend.usage_source} has no final record yet for job(s) {', '.join(sorted(late, key=_id_key))}")
                if late
                else None
            )
            return found, note
        sleep(1.0)


def _id_key(job_id: str) -> tuple[int, str]:
    head = job_id.split("_")[0]
    return (int(head), job_id) if head.isdigit() else (1 << 62, job_id)


# --- the chain's own records -----------------------------------------------------------


def load_runners(chain: ChainDir) -> list[RunnerView]:
    """Every runner of the chain: worker_ids.txt order, then runners.jsonl.

    Each is the runner's own record (``runners/<id>.json``, read as far as
    it is valid) overlaid with its runners.jsonl judgement (``verdict``,
    ``reason``, ``submitted``, the runner ``exit_code``): ``RunnerView.merge``;
    either may be missing.
    """
    ids = chain.worker_id_list()
    judged: dict[str, JudgedRunner] = {}
    for entry in chain.iter_runners():
        if entry.job_id:
            judged[entry.job_id] = entry
            ids.append(entry.job_id)
    return [
        RunnerView.merge(job_id, chain.runner_record(job_id, lenient=True), judged.get(job_id))
        for job_id in dict.fromkeys(ids)
    ]


def load_submitter_ids(chain: ChainDir, current: str = "") -> list[str]:
    """Every submitter job of the chain, in submission order: submitter_ids.txt,
    then ``current`` (state.json's) if the file lacks it."""
    ids = chain.submitter_id_list()
    return list(dict.fromkeys([*ids, current] if current else ids))


# --- the driver (submitter jobs) ---------------------------------------------------------


@dataclass(frozen=True)
class DriverUsage:
    """What the chain's submitter jobs held, beside what its runners held.

    Sums cover the jobs that have a record (``accounted`` of ``job_ids``);
    ``cpu_s`` (allocated CPUs x elapsed) is None when a record lacks the
    CPUs (the local backend allocates none). ``ratio`` = driver / runner
    CPU-seconds, only when every job of both kinds is accounted.
    """

    job_ids: list[str]
    accounted: int
    elapsed_s: float | None
    cpu_s: float | None
    runners: int
    runners_accounted: int
    runner_cpu_s: float | None
    source: str  # Backend.usage_source ("sacct", "local backend"), "" when no job has a record

    @property
    def ratio(self) -> float | None:
        complete = self.accounted == len(self.job_ids) and self.runners_accounted == self.runners
        if not complete or self.cpu_s is None or not self.runner_cpu_s:
            return None
        return round(self.cpu_s / self.runner_cpu_s, 4)

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": len(self.job_ids),
            "job_ids": self.job_ids,
            "accounted": self.accounted,
            "elapsed_s": self.elapsed_s,
            "cpu_s": self.cpu_s,
            "runners": self.runners,
            "runners_accounted": self.runners_accounted,
            "runner_cpu_s": self.runner_cpu_s,
            "ratio": self.ratio,
            "source": self.source,
        }


def _cpu_sum(jobs: list[JobUsage]) -> float | None:
    held = [u.cpu_seconds for u in jobs]
    if not jobs or any(c is None for c in held):
        return None
    return round(sum(c for c in held if c is not None), 3)


def driver_usage(
    submitter_ids: Sequence[str], runner_ids: Sequence[str], acct: Mapping[str, JobUsage], source: str
) -> DriverUsage:
    """Pure: the submitter jobs' allocation (``acct`` holds both kinds of job,
    from one ``Backend.usage`` request)."""
    subs = [acct[j] for j in submitter_ids if j in acct]
    runs = [acct[j] for j in runner_ids if j in acct]
    elapsed = [u.elapsed for u in subs if u.elapsed is not None]
    return DriverUsage(
        job_ids=list(submitter_ids),
        accounted=len(subs),
        elapsed_s=round(sum(elapsed), 3) if elapsed else None,
        cpu_s=_cpu_sum(subs),
        runners=len(runner_ids),
        runners_accounted=len(runs),
        runner_cpu_s=_cpu_sum(runs),
        source=source if subs else "",
    )


# --- rows and totals -------------------------------------------------------------------


def _iso(ts: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)) if ts is not None else ""


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def build_rows(
    runners: list[RunnerView],
    acct: Mapping[str, JobUsage],
    redone: Redone | None = None,
    *,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """One row per runner (COLUMNS); Slurm columns None without an accounting
    record, but the node (the runner's own ``host``) and the queue wait (our clock).

    allocated = the accounting's elapsed (else the runner's own wall time);
    useful = app start to stop signal or exit (capped at allocated), 0 when
    the counter did not advance (``chain.reporting.metrics.useful_seconds``);
    lost = allocated - useful, so the three add up per row; redone = the
    part of useful this runner spent computing again what an earlier one
    lost (``redone``, the chain's work redone: ``redone_part``), so
    allocated = (useful - redone) + redone + lost: the allocation line's sum,
    row by row. The redone columns are None when ``redone`` is (nothing tells
    what a killed app lost). A runner still running (a start, no end) counts
    as useful up to ``now`` if given.
    """
    return [_row(runner, acct.get(runner.job_id), redone, now) for runner in runners]


def _row(runner: RunnerView, u: JobUsage | None, redone: Redone | None, now: float | None) -> dict[str, Any]:
    """The runner's row of usage.csv: where the typed runner becomes the file's dict."""
    job_id = runner.job_id
    if now is not None and runner.start is not None and runner.end is None and not runner.judged:
        runner = dataclasses.replace(runner, end=now)  # running: useful so far
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        seq=runner.seq,
        job_id=job_id,
        runner_exit_code=runner.exit_code,
        app_exit_code=runner.app_exit_code,
        stop_to_exit_s=_r(runner.stop_to_exit),
        verdict=runner.verdict,
        reason=runner.reason,
        node=_short_host(runner.host),
        redone_iterations=None if redone is None else redone.by_job.get(job_id, 0),
        **_counters(runner),
    )
    row.update(_times(runner, u.elapsed if u is not None else None, redone))
    row.update(_accounted(u, row["node"]) if u is not None else {"queue_wait_s": _own_queue_wait(runner)})
    return row


def _counters(runner: RunnerView) -> dict[str, Any]:
    before, after = runner.iter_before, runner.iter_after
    iterations = after - before if before is not None and after is not None else None
    return {"iter_before": before, "iter_after": after, "iterations": iterations}


def _times(runner: RunnerView, elapsed: float | None, redone: Redone | None) -> dict[str, Any]:
    """allocated (accounted elapsed, else the runner's own wall time) = useful + lost;
    redone, the part of useful spent redoing (None when unknown)."""
    allocated = elapsed if elapsed is not None else runner_wall(runner)
    useful = useful_seconds(runner)
    if allocated is not None:
        useful = min(useful, allocated)
    useful = float(_r(useful) or 0.0)
    times = {
        "useful_s": useful,
        "redone_s": None if redone is None else _r(redone_part(redone, runner.job_id, useful)),
        "allocated_s": None,
        "lost_s": None,
    }
    if allocated is not None:
        times.update(allocated_s=_r(allocated), lost_s=round(float(_r(allocated) or 0) - useful, 3))
    return times


def _accounted(u: JobUsage, own_node: str | None) -> dict[str, Any]:
    """The Slurm columns from the job's accounting record."""
    return {
        "slurm_state": u.state,
        "slurm_exit_code": u.exit_code,
        "node": u.node or own_node,
        "submit": _iso(u.submit),
        "start": _iso(u.start),
        "end": _iso(u.end),
        "queue_wait_s": _r(u.queue_wait),
        "elapsed_s": _r(u.elapsed),
        "alloc_cpus": u.alloc_cpus,
        "cpu_s": _r(u.cpu),
        "max_rss_bytes": u.max_rss,
    }


def _own_queue_wait(runner: RunnerView) -> float | None:
    """Queue wait from our own clock: submission to the runner's start."""
    sub, st = runner.submitted, runner.start
    if sub and st is not None and st >= sub:
        return _r(st - sub)
    return None


def _short_host(host: str) -> str | None:
    """The runner's ``os.uname().nodename`` as Slurm names nodes (no domain)."""
    return host.split(".")[0] if host else None


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    return round(sum(float(r[key]) for r in rows if isinstance(r.get(key), (int, float))), 3)


def usage_totals(rows: list[dict[str, Any]], redone: Redone | None = None) -> dict[str, Any]:
    """Totals over the rows, each a row sum: allocated_s == useful_s + lost_s,
    and ``redone_s`` (and ``redone_iterations``) the sum of the rows' redone
    columns: the work the chain's runners redid, the part of useful that is
    not new work (``redone``, the chain's work redone, tells whether it is
    known; work redone by jobs that are not the chain's runners, in an
    iteration log, is in no row and so in no total).

    The efficiency is (useful - redone) / allocated: None when ``redone``
    is missing or cannot tell what a killed app lost.
    """
    rss = [int(r["max_rss_bytes"]) for r in rows if isinstance(r.get("max_rss_bytes"), int)]
    allocated = _sum(rows, "allocated_s")
    useful = _sum(rows, "useful_s")
    known = redone is not None and not redone.unknown
    redone_s = _sum(rows, "redone_s")
    return {
        "runners": len(rows),
        "allocated_s": allocated,
        "useful_s": useful,
        "lost_s": _sum(rows, "lost_s"),
        "queue_wait_s": _sum(rows, "queue_wait_s"),
        "cpu_s": _sum(rows, "cpu_s") if any(r.get("cpu_s") is not None for r in rows) else None,
        "max_rss_bytes": max(rss) if rss else None,
        "stop_to_exit_s": _sum(rows, "stop_to_exit_s"),
        "iterations": int(_sum(rows, "iterations")),
        "redone_iterations": int(_sum(rows, "redone_iterations")) if known else None,
        "redone_s": redone_s if known else None,
        "efficiency": round(max(0.0, useful - redone_s) / allocated, 4) if known and allocated > 0 else None,
    }
