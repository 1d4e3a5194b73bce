"""Usage of a chain's runners: sacct parsing, per-runner rows, totals.

Pure parts (``parse_sacct_usage``, ``build_rows``, ``usage_totals``,
``driver_usage``) take literal text and dicts; the one Slurm call
(``fetch_usage``) takes the run-command as a parameter so tests feed it
literal output. The *driver* is the chain's submitter jobs: their allocation
is a cost of the chain beside the runners'.
"""

from __future__ import annotations

import functools
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.backends import local_spool
from chain.backends.local.supervisor import JobRecord, Spool
from chain.backends.slurm.parse import parse_slurm_timestamp
from chain.errors import SchedulerError
from chain.reporting.metrics import runner_wall, useful_seconds
from chain.core.retry import RetryPolicy, TransientError, is_transient
from chain.store.state import ChainDir

# One call without -X: job lines carry state, exit code, times and TotalCPU
# (summed over the steps; with -X it prints 0); step lines carry MaxRSS.
# AllocCPUS last: output captured without it (10 fields) still parses.
SACCT_USAGE_FIELDS = "JobIDRaw,State,ExitCode,Submit,Start,End,ElapsedRaw,TotalCPU,NodeList,MaxRSS,AllocCPUS"
SACCT_BATCH = 1000  # job ids per sacct call (a long chain's command line stays short)
ACCOUNTING_DISABLED = "Slurm accounting storage is disabled"

Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]

COLUMNS = (
    "seq", "job_id",
    # from sacct (empty without accounting, but for node and queue wait: the
    # runner's own record has its host and our clock its submission and start)
    "slurm_state", "slurm_exit_code", "node", "submit", "start", "end",
    "queue_wait_s", "elapsed_s", "alloc_cpus", "cpu_s", "max_rss_bytes",
    # from the chain's own records
    "runner_exit_code", "app_exit_code", "iter_before", "iter_after", "iterations",
    "redone_iterations", "allocated_s", "useful_s", "lost_s", "stop_to_exit_s",
    "verdict", "reason",
)
SLURM_COLUMNS = COLUMNS[COLUMNS.index("slurm_state"):COLUMNS.index("max_rss_bytes") + 1]
_FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED",
          "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"}


# --- parsing -------------------------------------------------------------------------

def parse_cpu_time(text: str) -> float | None:
    """sacct's TotalCPU: ``MM:SS.mmm``, ``HH:MM:SS``, ``D-HH:MM:SS`` -> seconds."""
    m = re.fullmatch(r"\s*(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)\s*", text)
    if not m:
        return None
    days, hours, minutes, seconds = m.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def parse_size(text: str) -> int | None:
    """sacct's MaxRSS: ``3208K``, ``1.5G``, ``0`` -> bytes; empty -> None."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)([KMGTP]?)\s*", text)
    if not m:
        return None
    scale = 1024 ** " KMGTP".index(m.group(2) or " ")
    return int(float(m.group(1)) * scale)


@dataclass
class SacctUsage:
    """One job as sacct accounts it (job line plus the max over its steps)."""

    job_id: str
    state: str  # as printed: "CANCELLED by 0", "TIMEOUT", ...
    exit_code: str  # as printed: "99:0"
    submit: float | None = None
    start: float | None = None
    end: float | None = None
    elapsed: float | None = None
    cpu: float | None = None
    node: str = ""
    max_rss: int | None = None
    alloc_cpus: int | None = None

    @property
    def cpu_seconds(self) -> float | None:
        """The allocation: allocated CPUs x elapsed (what the job held, used or not)."""
        if self.alloc_cpus is None or self.elapsed is None:
            return None
        return self.alloc_cpus * self.elapsed

    @property
    def queue_wait(self) -> float | None:
        if self.submit is None or self.start is None:
            return None
        return max(0.0, self.start - self.submit)

    @property
    def final(self) -> bool:
        return self.state.split(" ")[0].rstrip("+") in _FINAL


def parse_sacct_usage(text: str) -> dict[str, SacctUsage]:
    """Output of ``sacct -n -P -o SACCT_USAGE_FIELDS`` (with or without -X)."""
    jobs: dict[str, SacctUsage] = {}
    steps: dict[str, list[int]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 10 or not parts[0]:
            continue
        job_id, state, exit_code, submit, start, end, elapsed, cpu, node, rss = parts[:10]
        alloc = parts[10].strip() if len(parts) > 10 else ""
        base, dot, _step = job_id.partition(".")
        size = parse_size(rss)
        if size is not None:
            steps.setdefault(base, []).append(size)
        if dot:
            continue
        jobs[job_id] = SacctUsage(
            job_id=job_id, state=state, exit_code=exit_code,
            submit=parse_slurm_timestamp(submit), start=parse_slurm_timestamp(start),
            end=parse_slurm_timestamp(end), elapsed=float(elapsed) if elapsed.isdigit() else None,
            cpu=parse_cpu_time(cpu), node="" if node in {"None assigned", "(null)"} else node,
            alloc_cpus=int(alloc) if alloc.isdigit() else None,
        )
    for job_id, sizes in steps.items():
        if job_id in jobs:
            jobs[job_id].max_rss = max(sizes)
    return jobs


# --- the Slurm call ------------------------------------------------------------------

def _default_run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, check=False)


def fetch_usage(
    job_ids: Sequence[str],
    run: Run = _default_run,
    *,
    ended: Iterable[str] = (),
    settle: float = 15.0,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, SacctUsage], str | None]:
    """sacct for ``job_ids`` in batched calls: (usage by job id, note or None).

    Records reach slurmdbd asynchronously: while a job in ``ended`` is
    missing or not yet final in sacct, ask again (up to ``settle`` seconds).
    A failure (accounting disabled, sacct missing) returns ({}, the reason).
    """
    ids = [j for j in dict.fromkeys(job_ids) if j]
    if not ids:
        return {}, None
    policy = retry or RetryPolicy(attempts=4, max_delay=60.0, sleep=sleep)
    want = set(ended) & set(ids)

    def once(batch: list[str]) -> str:
        argv = ["sacct", "-n", "-P", "-j", ",".join(batch), "-o", SACCT_USAGE_FIELDS]
        try:
            proc = run(argv)
        except FileNotFoundError:
            raise RuntimeError("sacct not found on PATH") from None
        except subprocess.TimeoutExpired:
            raise TransientError("sacct timed out") from None
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip()
            if is_transient(message):
                raise TransientError(message.replace("\n", " ")[:300])
            raise RuntimeError(_one_line(message) or f"sacct exited {proc.returncode}")
        return proc.stdout

    deadline = clock() + settle
    found: dict[str, SacctUsage] = {}
    while True:
        try:
            for i in range(0, len(ids), SACCT_BATCH):
                batch = ids[i:i + SACCT_BATCH]
                found.update(parse_sacct_usage(policy.call(functools.partial(once, batch))))
        except (RuntimeError, TransientError) as exc:
            return {}, f"accounting unavailable: {exc}"
        late = [j for j in want if j not in found or not found[j].final]
        if not late or clock() >= deadline:
            note = f"sacct has no final record yet for job(s) {', '.join(sorted(late, key=_id_key))}" if late else None
            return found, note
        sleep(1.0)


def _one_line(message: str) -> str:
    """The line that says why: the accounting-disabled message, else the last line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if ACCOUNTING_DISABLED in line:
            return ACCOUNTING_DISABLED
    return lines[-1][:300] if lines else ""


def _id_key(job_id: str) -> tuple[int, str]:
    head = job_id.split("_")[0]
    return (int(head), job_id) if head.isdigit() else (1 << 62, job_id)


# --- the chain's own records -----------------------------------------------------------

def load_runners(chain: ChainDir) -> list[dict[str, Any]]:
    """Every runner of the chain: worker_ids.txt order, then runners.jsonl.

    Each dict is the runner's own record (``runners/<id>.json``) overlaid with
    its runners.jsonl judgement (``verdict``, ``reason``, ``submitted``, the
    Slurm ``state`` and runner ``exit_code``); either may be missing.
    """
    ids: list[str] = []
    try:
        ids = [line.strip() for line in chain.worker_ids.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    except OSError:
        pass
    judged: dict[str, dict[str, Any]] = {}
    for entry in chain.iter_runners():
        job_id = str(entry.get("job_id") or "")
        if job_id:
            judged[job_id] = entry
            ids.append(job_id)
    runners: list[dict[str, Any]] = []
    for job_id in dict.fromkeys(ids):
        merged: dict[str, Any] = dict(chain.read_record(job_id) or {})
        merged["record"] = bool(merged)
        entry = judged.get(job_id, {})
        for key, value in entry.items():
            if value is not None or key not in merged:
                merged[key] = value
        merged["job_id"] = job_id
        merged["judged"] = bool(entry)
        runners.append(merged)
    return runners


def load_submitter_ids(chain: ChainDir, current: str = "") -> list[str]:
    """Every submitter job of the chain, in submission order: submitter_ids.txt,
    then ``current`` (state.json's) if the file lacks it."""
    ids: list[str] = []
    try:
        ids = [line.strip() for line in chain.submitter_ids.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    except OSError:
        pass
    return list(dict.fromkeys([*ids, current] if current else ids))


def local_usage(record: JobRecord, now: float) -> SacctUsage:
    """Pure: a local backend job record as sacct would account it. Its end
    is the scheduled one while it runs, so a running job's elapsed is up to
    ``now``. The local backend allocates no CPUs: ``alloc_cpus`` stays None."""
    end = None if record.active else record.end
    upto = now if record.active else end
    elapsed: float | None
    if record.start is None:
        elapsed = 0.0  # never started (pending, or cancelled before it ran): held nothing
    else:
        elapsed = max(0.0, upto - record.start) if upto is not None else None
    return SacctUsage(
        job_id=record.job_id, state=record.state,
        exit_code="" if record.exit_code is None else f"{record.exit_code}:{record.signal or 0}",
        submit=record.submit_time, start=record.start, end=end, elapsed=elapsed, node=record.hostname or "",
    )


def load_local_jobs(chain_root: Path, job_ids: Sequence[str], now: float) -> dict[str, SacctUsage]:
    """The local backend's own records (its spool in the chain directory) of
    ``job_ids``; read only, so a report never changes a job's record."""
    spool = Spool(local_spool(chain_root))
    found: dict[str, SacctUsage] = {}
    for job_id in job_ids:
        try:
            record = spool.read(job_id)
        except (SchedulerError, OSError):
            continue  # a corrupt or unreadable record: that job stays unaccounted
        if record is not None:
            found[job_id] = local_usage(record, now)
    return found


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
    source: str  # "sacct", "local backend", or "" when no submitter job has a record

    @property
    def ratio(self) -> float | None:
        complete = self.accounted == len(self.job_ids) and self.runners_accounted == self.runners
        if not complete or self.cpu_s is None or not self.runner_cpu_s:
            return None
        return round(self.cpu_s / self.runner_cpu_s, 4)

    def to_json(self) -> dict[str, Any]:
        return {"jobs": len(self.job_ids), "job_ids": self.job_ids, "accounted": self.accounted,
                "elapsed_s": self.elapsed_s, "cpu_s": self.cpu_s, "runners": self.runners,
                "runners_accounted": self.runners_accounted, "runner_cpu_s": self.runner_cpu_s,
                "ratio": self.ratio, "source": self.source}


def _cpu_sum(jobs: list[SacctUsage]) -> float | None:
    held = [u.cpu_seconds for u in jobs]
    if not jobs or any(c is None for c in held):
        return None
    return round(sum(c for c in held if c is not None), 3)


def driver_usage(submitter_ids: Sequence[str], runner_ids: Sequence[str],
                 acct: Mapping[str, SacctUsage], source: str) -> DriverUsage:
    """Pure: the submitter jobs' allocation (``acct`` holds both kinds of job,
    from one sacct call or the local backend's records)."""
    subs = [acct[j] for j in submitter_ids if j in acct]
    runs = [acct[j] for j in runner_ids if j in acct]
    elapsed = [u.elapsed for u in subs if u.elapsed is not None]
    return DriverUsage(
        job_ids=list(submitter_ids), accounted=len(subs),
        elapsed_s=round(sum(elapsed), 3) if elapsed else None, cpu_s=_cpu_sum(subs),
        runners=len(runner_ids), runners_accounted=len(runs), runner_cpu_s=_cpu_sum(runs),
        source=source if subs else "",
    )


# --- rows and totals -------------------------------------------------------------------

def _iso(ts: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)) if ts is not None else ""


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def build_rows(runners: list[dict[str, Any]], acct: Mapping[str, SacctUsage],
               redone_by_job: Mapping[str, int] | None = None, *,
               now: float | None = None) -> list[dict[str, Any]]:
    """One row per runner (COLUMNS); Slurm columns None without a sacct record,
    but the node (the runner's own ``host``) and the queue wait (our clock).

    allocated = sacct's elapsed (else the runner's own wall time);
    useful = app start to stop signal or exit (capped at allocated), 0 when
    the counter did not advance (``chain.reporting.metrics.useful_seconds``);
    lost = allocated - useful, so the three add up per row. A runner still
    running (a start, no end) counts as useful up to ``now`` if given.
    """
    rows: list[dict[str, Any]] = []
    for runner in runners:
        job_id = str(runner["job_id"])
        u = acct.get(job_id)
        running = (now is not None and isinstance(runner.get("start"), (int, float))
                   and runner.get("end") is None and not runner.get("judged"))
        if running:
            runner = dict(runner, end=now)
        allocated = u.elapsed if u is not None and u.elapsed is not None else runner_wall(runner)
        useful = useful_seconds(runner)
        if allocated is not None:
            useful = min(useful, allocated)
        before, after = runner.get("iter_before"), runner.get("iter_after")
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(
            seq=runner.get("seq"), job_id=job_id,
            runner_exit_code=runner.get("exit_code"), app_exit_code=runner.get("app_exit_code"),
            iter_before=before, iter_after=after,
            iterations=(after - before) if isinstance(before, int) and isinstance(after, int) else None,
            redone_iterations=(redone_by_job or {}).get(job_id, 0 if redone_by_job is not None else None),
            allocated_s=_r(allocated), useful_s=_r(useful),
            lost_s=round(float(_r(allocated) or 0) - float(_r(useful) or 0), 3) if allocated is not None else None,
            stop_to_exit_s=_r(runner.get("stop_to_exit")),
            verdict=runner.get("verdict"), reason=runner.get("reason"),
            node=_short_host(runner.get("host")),
        )
        if u is not None:
            row.update(slurm_state=u.state, slurm_exit_code=u.exit_code, node=u.node or row["node"],
                       submit=_iso(u.submit), start=_iso(u.start), end=_iso(u.end),
                       queue_wait_s=_r(u.queue_wait), elapsed_s=_r(u.elapsed), alloc_cpus=u.alloc_cpus,
                       cpu_s=_r(u.cpu), max_rss_bytes=u.max_rss)
        else:
            # Queue wait from our own clock: submission to the runner's start.
            sub, st = runner.get("submitted"), runner.get("start")
            if isinstance(sub, (int, float)) and isinstance(st, (int, float)) and sub and st >= sub:
                row["queue_wait_s"] = _r(st - sub)
        rows.append(row)
    return rows


def _short_host(host: Any) -> str | None:
    """The runner's ``os.uname().nodename`` as Slurm names nodes (no domain)."""
    if not isinstance(host, str) or not host:
        return None
    return host.split(".")[0]


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    return round(sum(float(r[key]) for r in rows if isinstance(r.get(key), (int, float))), 3)


def usage_totals(rows: list[dict[str, Any]], redone_iterations: int | None = None,
                 redone_seconds: float | None = None) -> dict[str, Any]:
    """Totals over the rows; allocated_s == useful_s + lost_s (each is a row sum)."""
    rss = [int(r["max_rss_bytes"]) for r in rows if isinstance(r.get("max_rss_bytes"), int)]
    allocated = _sum(rows, "allocated_s")
    useful = _sum(rows, "useful_s")
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
        "redone_iterations": redone_iterations,
        "redone_s": None if redone_seconds is None else round(redone_seconds, 3),
        "efficiency": round(useful / allocated, 4) if allocated > 0 else None,
    }
