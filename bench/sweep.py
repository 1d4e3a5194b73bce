#!/usr/bin/env python3
"""A sweep larger than the cluster: N chains on the dev cluster's job slots.

For each mode (submitter, relay) and each N (16, 64, 200 by default), N working
directories under bench/.work/<timestamp>/, each with a copy of
examples/python/app.py, are submitted as N chains through the Python API
(``Chain.submit_many``) and waited on with ``Chain.wait_all``. Mode
``dependency`` (not by default) is the same work without chain: each chain
hand-written as Slurm's "pipelines with job dependencies" teach, its
``--dependency-jobs`` jobs queued at once, each behind the one before
(``afterany``), the app alone in each with the deadline chain would give it;
its figures are Slurm's own floor for this workload on this cluster. Measured:

- **time to the last completion**: the first submit → the last chain's end
  (its state turning completed, after its hooks: ``handoff.chain_done``),
  against the **slot bound**, the sweep's app compute (N × MAX_ITER ×
  ITER_SECONDS) over the cluster's job slots, or one chain's compute when
  N is below the slots: no schedule can finish sooner, even one where
  nothing but the apps ever holds a slot. Also: how busy the slots were
  (all the sweep's sacct CPU-seconds over slots × that time), and the time
  over the runners' own allocation over the slots;
- **slurmctld RPCs** from ``sdiag``: the counters are reset (``sdiag -r``, as
  root) just before the first submit and read once after every job of the
  sweep has left (waited for with ``sacct``, which asks slurmdbd, not
  slurmctld): the sum of the "by message type" counts (and by user), per
  runner job that ran the app, and per second of the counting window; the
  RPCs of the daemons (slurmd's job completions, slurmdbd's updates) and of
  the benchmark's own ``sdiag`` are also given apart;
- **idle allocation**: CPU-seconds (``sacct -X`` CPUTimeRaw) of the sweep's
  jobs that did not run the app (submitters ``<chain id>.s<cycle>``; runners
  ``<chain id>.r<seq>`` that only judged or were cancelled) over those of the
  runner jobs that ran it, as ``bench/handoff.py`` computes it per chain;
- **correctness**: every chain completed, and every iteration 1..MAX_ITER
  was done exactly once (the app's ``iterations.log``).

The workload (flags): MAX_ITER 10 iterations of 1 s, a checkpoint every 5,
``runner_time="0:15"``, ``runner_margin=5`` (a 10 s window: two runners a
chain), chain's defaults otherwise (``--step-aside-after`` sets submitter
mode's; the recorded run used 10, as tests/e2e/test_sweep_e2e.py does).
The app is started with the interpreter running the bench (``--app-python``),
chain's own, in every mode: ``python3`` on this machine's PATH is pyenv's
shim, a bash script that costs each start ~50 ms more CPU than the
interpreter it ends in (16 starting at once on 2 CPUs): this machine's, not
the workload's. ``--repeat K`` runs every mode and size K times, the modes
interleaved, and tables the medians (one run moves by about ±0.08 × here).

Leftover jobs of a run (a failed or stranded chain) are cancelled
(``Chain.cancel``, then ``scancel`` of every job named after one of its
chains), so the cluster is clean afterwards. Prints a markdown table and
writes bench/results/sweep-<date>.json (raw) and .md (the table), with the
machine, the git commit measured and the load around every run.

Not part of the test suite. Needs the dev cluster and root (``sdiag -r``);
run it with a Python that has this checkout installed as a user installs
chain, a wheel (the developers' editable install costs every Python start,
a runner's and its app's, ~12 ms more CPU; the results say which chain the
jobs ran, and the bench refuses an installed one that is not this checkout's):
    bash scripts/dev-cluster up; eval "$(bash scripts/dev-cluster env)"
    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install -q .
    flock /tmp/chain-cluster.lock /tmp/bench-venv/bin/python bench/sweep.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from handoff import (
    ACTIVE,
    APP,
    BENCH,
    ROOT,
    chain_done,
    ctld_events,
    fmt,
    git_commit,
    loadavg,
    log,
    machine,
    min_job_age,
    real,
    timed,
    write_results,
)

from chain import Chain
from chain.core.settings import Settings
from chain.core.timefmt import parse_slurm_time
from chain.errors import ChainError

MODES = ("submitter", "relay")
# Not chain: hand-written dependency chains (each chain's jobs queued at once,
# each behind the one before: ``sbatch --dependency=afterany``), the app alone
# in each job. Slurm's own floor for this workload on this cluster.
DEPENDENCY = "dependency"
DEPENDENCY_SCRIPT = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --output=/dev/null
#SBATCH --time={time}
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem={mem}
#SBATCH --partition=debug
cd {workdir} || exit 2
export MAX_ITER={max_iter} CHECKPOINT_EVERY={every} ITER_SECONDS={secs}
# chain's runner gives the app its job's end less the margin, the end from
# Slurm's start; a script knows only its own start, up to a second later
export CHAIN_DEADLINE=$(( $(date +%s) + {window} ))
exec {python} app.py
"""
SIZES = (16, 64, 200)
# RPCs slurmctld gets from its own daemons, not from a client command: slurmd
# (a batch job's end, its epilog, the node's registration) and slurmdbd
DAEMON_RPCS = frozenset(
    {
        "REQUEST_COMPLETE_BATCH_SCRIPT",
        "MESSAGE_EPILOG_COMPLETE",
        "REQUEST_COMPLETE_PROLOG",
        "MESSAGE_NODE_REGISTRATION_STATUS",
        "REQUEST_STEP_COMPLETE",
        "ACCOUNTING_UPDATE_MSG",
    }
)
BENCH_RPCS = frozenset({"REQUEST_STATS_INFO"})  # the benchmark's own sdiag
SACCT_FIELDS = ("JobIDRaw", "JobName", "State", "AllocCPUS", "ElapsedRaw", "CPUTimeRaw", "Submit", "Start", "End")
ENDED = ("completed", "failed", "stopped", "cancelled")
RPC_LINE = re.compile(r"^\s*(\S+)\s+\(\s*\d+\)\s+count:(\d+)")


@dataclass(frozen=True)
class Workload:
    """One chain's work: the same for every chain of every run."""

    max_iter: int
    iter_seconds: float
    checkpoint_every: int
    runner_time: str
    runner_margin: int
    step_aside_after: int | None  # None: chain's default
    app_python: str  # the interpreter the app is started with (``--app-python``)

    def spec(self, workdir: Path, mode: str, job_name: str) -> dict[str, Any]:
        """``Chain.submit`` keywords for one chain of this workload."""
        spec: dict[str, Any] = {
            "workdir": workdir,
            "app_cmd": f"ITER_SECONDS={self.iter_seconds:g} {shlex.quote(self.app_python)} app.py",
            "max_iter": self.max_iter,
            "checkpoint_every": self.checkpoint_every,
            "runner_time": self.runner_time,
            "runner_margin": self.runner_margin,
            "mode": mode,
            "backend": "slurm",
            "partition": "debug",
            "job_name": job_name,
        }
        if self.step_aside_after is not None and mode == "submitter":
            spec["step_aside_after"] = self.step_aside_after
        return spec

    @property
    def compute_s(self) -> float:
        return self.max_iter * self.iter_seconds


# --------------------------------------------------------------------------- the cluster
def job_slots() -> int:
    """Job slots of the cluster: the CPUs of its nodes (one CPU a job)."""
    out = real("scontrol", "show", "node").stdout
    return sum(int(x) for x in re.findall(r"\bCPUTot=(\d+)", out))


def parse_sdiag(text: str) -> dict[str, Any]:
    """The RPC counts of ``sdiag`` (by message type, by user) and its job counters."""
    by_type: dict[str, int] = {}
    by_user: dict[str, int] = {}
    section: dict[str, int] | None = None
    for line in text.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            section = by_type
        elif line.startswith("Remote Procedure Call statistics by user"):
            section = by_user
        elif line.startswith("Pending RPC"):
            section = None
        elif section is not None and (m := RPC_LINE.match(line)):
            section[m.group(1)] = section.get(m.group(1), 0) + int(m.group(2))
    since = re.search(r"^Data since\s+.*\((\d+)\)", text, re.MULTILINE)
    jobs = {k.lower().replace(" ", "_"): int(v) for k, v in re.findall(r"^(Jobs \w+):\s+(\d+)", text, re.MULTILINE)}
    return {
        "by_type": dict(sorted(by_type.items(), key=lambda kv: -kv[1])),
        "by_user": by_user,
        "total": sum(by_type.values()),
        "total_by_user": sum(by_user.values()),
        "data_since": int(since.group(1)) if since else None,
        "jobs": jobs,
    }


def sdiag_reset() -> float:
    p = real("sdiag", "-r")
    if p.returncode != 0:
        raise SystemExit(f"sdiag -r failed (root needed): {p.stderr.strip()}")
    return time.time()


def sdiag_read() -> tuple[float, dict[str, Any]]:
    p = real("sdiag")
    return time.time(), parse_sdiag(p.stdout)


class LoadSampler:
    """The 1-minute load average every few seconds while a run lasts."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = []
        self._every, self._halt = every, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(loadavg()[0])
            if self._halt.wait(self._every):
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=10)

    def summary(self) -> dict[str, float | None]:
        s = self.samples
        return {"min": min(s, default=None), "median": statistics.median(s) if s else None, "max": max(s, default=None)}


# --------------------------------------------------------------------------- the sweep's jobs
def sacct_rows(since: float, chain_ids: set[str]) -> dict[str, dict[str, str]]:
    """sacct -X rows of every job since SINCE named ``<chain id>.…`` of the sweep."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 5))
    out = real("sacct", "-X", "-n", "-P", "-S", start, "-o", ",".join(SACCT_FIELDS)).stdout
    rows: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        row = dict(zip(SACCT_FIELDS, line.split("|"), strict=False))
        if len(row) == len(SACCT_FIELDS) and row["JobName"].rpartition(".")[0] in chain_ids:
            rows[row["JobIDRaw"]] = row
    return rows


def wait_jobs_left(
    since: float, chain_ids: set[str], deadline: float, *, expected: int = 0, pending_too: bool = False
) -> dict[str, dict[str, str]]:
    """Wait (asking slurmdbd, not slurmctld) until accounting shows at least
    ``expected`` jobs of the sweep and none runs; its sacct rows then. A job
    still PENDING is a leftover, not waited for, unless ``pending_too`` (a
    hand-written chain's later jobs pend until the one before ends)."""
    while True:
        rows = sacct_rows(since, chain_ids)
        live = [
            j for j, r in rows.items() if r["State"].split()[0] in ACTIVE and (pending_too or r["State"] != "PENDING")
        ]
        if (len(rows) >= expected and not live) or time.time() >= deadline:
            return rows
        time.sleep(2.0)


def cancel_one(chain: Chain) -> str:
    """``Chain.cancel`` a chain that has not ended (from its state file); what was done."""
    try:
        state = json.loads((chain.chain_dir / "state.json").read_text()).get("state")
    except (OSError, ValueError):
        state = None
    if state in ENDED:
        return ""
    try:
        chain.cancel()
    except ChainError as exc:
        return f"{chain.chain_dir.parent.name}: cancel failed: {exc}"
    return f"{chain.chain_dir.parent.name}: {state}, cancelled"


def cancel_leftovers(chains: list[Chain], job_name: str) -> list[str]:
    """``Chain.cancel`` every chain not ended, then ``scancel`` every queued
    or running job of the sweep (named ``<job_name>-<hex>.…``: this run's
    prefix); what was done."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        done = [x for x in pool.map(cancel_one, chains) if x]
    if done:
        log(f"cancelled {len(done)} chains not ended")
        time.sleep(2.0)
    return done + scancel_named(job_name)


def scancel_named(job_name: str) -> list[str]:
    """``scancel`` every queued or running job named ``<job_name>-…`` (this
    run's prefix); what was done."""
    rows = real("squeue", "-h", "-o", "%i %j").stdout.splitlines()
    left = [f[0] for f in (r.split() for r in rows) if len(f) == 2 and f[1].startswith(f"{job_name}-")]
    if left:
        real("scancel", *left)
    return [f"scancel {j}" for j in left]


# --------------------------------------------------------------------------- one run
def make_workdirs(base: Path, n: int) -> list[Path]:
    dirs = [base / f"c{i:03d}" for i in range(n)]
    for d in dirs:
        d.mkdir(parents=True)
        shutil.copy(APP, d / "app.py")
    return dirs


def submit_and_wait(
    chains_out: list[Chain], specs: list[dict[str, Any]], args: argparse.Namespace, note: dict[str, Any]
) -> None:
    """Submit the sweep and wait for it; times and any error go into NOTE."""
    note["t_reset"] = sdiag_reset()
    note["t_submit"] = time.time()
    try:
        chains_out += Chain.submit_many(specs, parallel=args.parallel)
        note["t_submitted"] = time.time()
        log(f"submitted {len(chains_out)} chains in {note['t_submitted'] - note['t_submit']:.1f} s; waiting")
        Chain.wait_all(chains_out, timeout=args.timeout, poll=args.poll, check=args.check)
    except ChainError as exc:
        note["error"] = str(exc)
        log(f"sweep: {exc}")
    note["t_waited"] = time.time()


def submit_dependency_chain(workdir: Path, job_name: str, work: Workload, jobs: int) -> list[str]:
    """A hand-written dependency chain: JOBS sbatch calls, each job behind the
    one before (``afterany``: it runs however the one before ended)."""
    secs = parse_slurm_time(work.runner_time, what="runner time")
    ids: list[str] = []
    for k in range(1, jobs + 1):
        script = workdir / f"job{k}.sh"
        script.write_text(
            DEPENDENCY_SCRIPT.format(
                name=f"{job_name}.r{k}",
                time=work.runner_time,
                workdir=shlex.quote(str(workdir)),
                max_iter=work.max_iter,
                every=work.checkpoint_every,
                secs=f"{work.iter_seconds:g}",
                window=secs - work.runner_margin,
                mem=Settings().runner_mem,  # the resources chain's runner asks by default
                python=shlex.quote(work.app_python),
            )
        )
        dep = [f"--dependency=afterany:{ids[-1]}"] if ids else []
        out = real("sbatch", "--parsable", *dep, str(script), check=True).stdout
        ids.append(out.strip().split(";")[0])
    return ids


def run_dependency(base: Path, n: int, work: Workload, args: argparse.Namespace) -> dict[str, Any]:
    """N hand-written dependency chains of ``args.dependency_jobs`` jobs, measured as a sweep of chains is."""
    name = f"{DEPENDENCY}-{n}"
    dirs = make_workdirs(base / name, n)
    job_name = f"bswd{n}x{int(time.time()) % 100000}"  # apart from an earlier run's jobs
    chain_ids = {f"{job_name}-{d.name}" for d in dirs}
    others = real("squeue", "-h", "-o", "%i").stdout.split()
    log(f"{name}: {n} dependency chains in {base / name} ({len(others)} other jobs queued)")
    note: dict[str, Any] = {"other_jobs_at_start": len(others)}
    load = LoadSampler()
    load.start()

    def submit_and_wait(note: dict[str, Any]) -> None:
        note["t_reset"] = sdiag_reset()
        note["t_submit"] = time.time()
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            list(
                pool.map(lambda d: submit_dependency_chain(d, f"{job_name}-{d.name}", work, args.dependency_jobs), dirs)
            )
        note["t_submitted"] = time.time()
        log(f"submitted {n} dependency chains in {note['t_submitted'] - note['t_submit']:.1f} s; waiting")
        note["rows"] = wait_jobs_left(
            note["t_submit"],
            chain_ids,
            time.time() + args.timeout,
            expected=n * args.dependency_jobs,
            pending_too=True,
        )
        note["t_waited"] = time.time()

    try:
        timed(submit_and_wait, note, note)
        rows = note.pop("rows")
        t_read, sdiag = sdiag_read()
    finally:
        load.stop()
        note["load_1min_during"] = load.summary()
        note["cancelled_by_bench"] = scancel_named(job_name)
    per = dependency_results(dirs, work)
    res = measure(per, dirs, rows, sdiag, t_read, note, work)
    res.update(mode=DEPENDENCY, n=n, name=name, workdir=str(base / name), job_name=job_name)
    log(
        f"{name}: last completion {fmt(res['submit_to_last_completion_s'])} s = {fmt(res['over_slot_bound'], 2)} × the slot bound"
    )
    return res


def run_sweep(base: Path, mode: str, n: int, work: Workload, args: argparse.Namespace) -> dict[str, Any]:
    """One sweep of N chains in MODE, measured; the cluster left clean."""
    if mode == DEPENDENCY:
        return run_dependency(base, n, work, args)
    name = f"{mode}-{n}"
    dirs = make_workdirs(base / name, n)
    job_name = f"bsw{mode[0]}{n}"
    specs = [work.spec(d, mode, job_name) for d in dirs]
    others = real("squeue", "-h", "-o", "%i").stdout.split()
    log(f"{name}: {n} chains in {base / name} ({len(others)} other jobs queued)")
    chains: list[Chain] = []
    note: dict[str, Any] = {"other_jobs_at_start": len(others)}
    chain_ids: set[str] = set()
    load = LoadSampler()
    load.start()
    try:
        timed(submit_and_wait, note, chains, specs, args, note)
        chain_ids = {c.chain_id for c in chains}
        rows = wait_jobs_left(note["t_submit"], chain_ids, time.time() + args.drain)
        t_read, sdiag = sdiag_read()
    finally:
        load.stop()
        note["load_1min_during"] = load.summary()
        note["cancelled_by_bench"] = cancel_leftovers(chains, job_name)
    if note["cancelled_by_bench"]:
        rows = sacct_rows(note["t_submit"], chain_ids)
    res = measure(chain_results(dirs, work), dirs, rows, sdiag, t_read, note, work)
    res.update(mode=mode, n=n, name=name, workdir=str(base / name), job_name=job_name)
    log(
        f"{name}: last completion {fmt(res['submit_to_last_completion_s'])} s = "
        f"{fmt(res['over_slot_bound'], 2)} × the slot bound; RPCs {sdiag['total']}; "
        f"completed {res['chains_completed']}/{n}; idle {fmt(res['idle_allocation_ratio'], 3)}"
    )
    return res


# --------------------------------------------------------------------------- measurement
@dataclass
class AppLog:
    """What the app's iterations.log (``<epoch> <event> <iteration> <job>
    <pid> [code]``) tells: how often each iteration was done, the jobs that
    started the app, when it exited 0."""

    done: Counter[int]
    jobs: set[str]
    finished: list[float]


def iterations(workdir: Path) -> AppLog:
    """The app's log in WORKDIR (empty when it cannot be read)."""
    log_ = AppLog(Counter(), set(), [])
    try:
        lines = (workdir / "iterations.log").read_text().splitlines()
    except OSError:
        return log_
    for line in lines:
        f = line.split()
        if len(f) >= 5 and f[1] == "iter":
            log_.done[int(f[2])] += 1
        elif len(f) >= 5 and f[1] == "start":
            log_.jobs.add(f[3])
        elif len(f) >= 6 and f[1] == "exit" and f[5] == "0":
            log_.finished.append(float(f[0]))
    return log_


def hook_seconds(dirs: list[Path]) -> dict[str, float] | None:
    """How long each chain's completion hooks took (chain's own ``chain
    report``, always run: in the submitter's job, or in relay mode in the last
    runner's allocation), from state.json: median and max."""
    took: list[float] = []
    for d in dirs:
        try:
            hooks = json.loads((d / ".chain" / "state.json").read_text()).get("hooks", [])
        except (OSError, ValueError):
            continue
        ran = [h for h in hooks if isinstance(h, dict) and h.get("started") and h.get("ended")]
        if ran:
            took.append(max(h["ended"] for h in ran) - min(h["started"] for h in ran))
    return {"median": statistics.median(took), "max": max(took)} if took else None


Judged = tuple[str, float | None, str | None]  # a chain's state, its end (completed), why not completed


def tally(dirs: list[Path], work: Workload, judge: Callable[[Path, AppLog], Judged]) -> dict[str, Any]:
    """Per chain (``judge``: its state and end): states, ends, the runners
    that ran the app, iterations done twice or never (the app's own log)."""
    states: Counter[str] = Counter()
    ends: list[float] = []
    ran_app: set[str] = set()
    twice, missing, not_completed, runners = 0, 0, [], []
    for d in dirs:
        app = iterations(d)
        state, end, why = judge(d, app)
        states[state] += 1
        if end is not None:
            ends.append(end)
        if why is not None:
            not_completed.append(why)
        ran_app |= app.jobs
        runners.append(len(app.jobs))
        twice += sum(c - 1 for c in app.done.values() if c > 1)
        missing += sum(1 for k in range(1, work.max_iter + 1) if k not in app.done)
    return {
        "states": dict(states),
        "ends": ends,
        "ran_app": ran_app,
        "iterations_done_twice": twice,
        "iterations_never_done": missing,
        "not_completed": not_completed[:20],
        "runners_per_chain": dict(sorted(Counter(runners).items())),
    }


def chain_results(dirs: list[Path], work: Workload) -> dict[str, Any]:
    """``tally`` of chains: each one's state and end from its state.json."""

    def judge(d: Path, _app: AppLog) -> Judged:
        try:
            state = json.loads((d / ".chain" / "state.json").read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("state") == "completed":
            return "completed", chain_done(state)[0], None
        return (
            str(state.get("state", "not submitted")),
            None,
            f"{d.name}: {state.get('state')} {state.get('reason', '')}".strip(),
        )

    return tally(dirs, work, judge)


def dependency_results(dirs: list[Path], work: Workload) -> dict[str, Any]:
    """``tally`` of hand-written dependency chains: one is complete, and
    ended, when its app exited 0 after MAX_ITER (the app's own log: a chain's
    completion, too, is stamped in its last job, before that job's end)."""

    def judge(d: Path, app: AppLog) -> Judged:
        if not (app.finished and work.max_iter in app.done):
            return "not completed", None, d.name
        return "completed", max(app.finished), None

    return tally(dirs, work, judge)


def allocation(rows: dict[str, dict[str, str]], ran_app: set[str]) -> dict[str, Any]:
    """CPU-seconds by kind of job (handoff.py's rule, batched over the sweep)."""
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for j, r in rows.items():
        tail = r["JobName"].rpartition(".")[2]
        kind = (
            "runner, ran the app"
            if j in ran_app
            else "submitter"
            if re.fullmatch(r"s\d+", tail)
            else "runner, no app"
            if re.fullmatch(r"r\d+", tail)
            else "other job of the chain"
        )
        cpu[kind] += int(r["CPUTimeRaw"] or 0)
        count[kind] += 1
    runner_cpu = cpu["runner, ran the app"]
    other = sum(v for k, v in cpu.items() if k != "runner, ran the app")
    states = Counter(r["State"].split()[0] for r in rows.values())
    return {
        "cpu_s_by_kind": dict(cpu),
        "jobs_by_kind": dict(count),
        "runner_cpu_s": runner_cpu,
        "non_runner_cpu_s": other,
        "ratio": other / runner_cpu if runner_cpu else None,
        "job_states": dict(states),
        "how": "sacct -X -o " + ",".join(SACCT_FIELDS),
    }


def sacct_epoch(s: str) -> float | None:
    try:
        return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def last_job_end(rows: dict[str, dict[str, str]]) -> float:
    """When the sweep's last job left its allocation: slurmctld.log's
    ``_job_complete`` (ms), else sacct's End (1 s)."""
    events = ctld_events(sorted(rows, key=int))
    ends = [events[j].get("complete") or sacct_epoch(r["End"]) for j, r in rows.items()]
    return max((e for e in ends if e), default=0.0)


def rpc_figures(sdiag: dict[str, Any], window: float, runners: int) -> dict[str, Any]:
    daemon = sum(v for k, v in sdiag["by_type"].items() if k in DAEMON_RPCS)
    own = sum(v for k, v in sdiag["by_type"].items() if k in BENCH_RPCS)
    clients = sdiag["total"] - daemon - own
    return {
        "rpcs_total": sdiag["total"],
        "rpcs_daemons": daemon,
        "rpcs_bench_sdiag": own,
        "rpcs_clients": clients,
        "counting_window_s": window,
        "rpcs_per_runner": sdiag["total"] / runners if runners else None,
        "client_rpcs_per_runner": clients / runners if runners else None,
        "rpcs_per_s": sdiag["total"] / window if window else None,
    }


def measure(
    per: dict[str, Any],
    dirs: list[Path],
    rows: dict[str, dict[str, str]],
    sdiag: dict[str, Any],
    t_read: float,
    note: dict[str, Any],
    work: Workload,
) -> dict[str, Any]:
    """The run's figures from PER (``chain_results`` or ``dependency_results``)."""
    slots = note["slots"] = job_slots()
    alloc = allocation(rows, per["ran_app"])
    t0, n = note["t_submit"], len(dirs)
    last = max(per["ends"]) if per["ends"] else None
    span = last - t0 if last else None
    # no chain ends before its own compute, nor the sweep before its compute fills every slot
    bound = max(work.compute_s, n * work.compute_s / slots)
    runner_bound = max(alloc["runner_cpu_s"] / n, alloc["runner_cpu_s"] / slots)
    runners = alloc["jobs_by_kind"].get("runner, ran the app", 0)
    return {
        "ok": per["states"].get("completed", 0) == len(dirs)
        and not per["iterations_done_twice"]
        and not per["iterations_never_done"]
        and not note.get("error"),
        "submit_to_last_completion_s": span,
        "slot_bound_s": bound,
        "over_slot_bound": span / bound if span else None,
        "runner_allocation_bound_s": runner_bound,
        "over_runner_allocation_bound": span / runner_bound if span and runner_bound else None,
        "submit_to_last_job_end_s": last_job_end(rows) - t0 if rows else None,
        "submit_to_chain_end_s": {"median": statistics.median(per["ends"]) - t0, "min": min(per["ends"]) - t0}
        if per["ends"]
        else None,
        "submit_s": note.get("t_submitted", t0) - t0,
        "chains_completed": per["states"].get("completed", 0),
        "states": per["states"],
        "not_completed": per["not_completed"],
        "runners_per_chain": per["runners_per_chain"],
        "iterations_done_twice": per["iterations_done_twice"],
        "iterations_never_done": per["iterations_never_done"],
        "hooks_s": hook_seconds(dirs),
        "runner_jobs_ran_app": runners,
        **rpc_figures(sdiag, t_read - note["t_reset"], runners),
        "idle_allocation_ratio": alloc["ratio"],
        "allocation": alloc,
        "sdiag": sdiag,
        "rpcs_by_user": sdiag["by_user"],
        "slots": slots,
        **{k: v for k, v in note.items() if k != "slots"},
    }


# --------------------------------------------------------------------------- report
def render(results: dict[str, Any]) -> str:
    w, runs, m = results["workload"], results["runs"], results["machine"]
    L = [
        f"# A sweep larger than the cluster (bench/sweep.py), {results['date']}",
        "",
        (
            f"Commit {results['git_at_start']['commit']} (at the end {results['git_at_end']['commit']}); "
            f"{results['cluster']}, {runs[0]['slots'] if runs else '?'} job slots; {m['nproc']} CPUs (nproc), "
            f"Debian {m['debian_version']}, host {m['hostname']}."
        ),
        "",
        (
            f"Each chain: `examples/python/app.py`, {w['max_iter']} iterations of {w['iter_seconds']:g} s, "
            f"checkpoint every {w['checkpoint_every']}, `runner_time={w['runner_time']!r}`, "
            f"`runner_margin={w['runner_margin']}`, step_aside_after "
            f"{w['step_aside_after'] if w['step_aside_after'] is not None else 'default'}; partition debug; "
            f"`Chain.submit_many(parallel={results['args']['parallel']})`, `Chain.wait_all(poll="
            f"{results['args']['poll']:g}, check={results['args']['check']:g})`."
        ),
        "",
        f"Chain and its bytecode: {results.get('bytecode', 'not recorded (chain/ compiled by whatever ran it before)')}.",
        "",
        f"The app started with: `{w.get('app_python', 'python3')}`.",
        "",
        (
            "| mode | N | first submit → last completion | slot bound | ratio | slots busy "
            "| RPCs total (clients) | per runner | per second | idle allocation | chains completed "
            "| iterations done twice / never | runners: chains | load 1 min (min–max) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ld = r.get("load_1min_during") or {}
        per_chain = ", ".join(f"{k}: {v}" for k, v in r["runners_per_chain"].items())
        L.append(
            f"| {r['mode']} | {r['n']} | {fmt(r['submit_to_last_completion_s'])} s | {fmt(r['slot_bound_s'])} s "
            f"| **{fmt(r['over_slot_bound'], 2)} ×** | {fmt(busy(r), 2)} "
            f"| {r['rpcs_total']} ({r['rpcs_clients']}) | {fmt(r['rpcs_per_runner'], 1)} "
            f"| **{fmt(r['rpcs_per_s'], 2)}** | {fmt(r['idle_allocation_ratio'], 3)} "
            f"| {r['chains_completed']}/{r['n']} | {r['iterations_done_twice']} / {r['iterations_never_done']} "
            f"| {per_chain} | {fmt(ld.get('min'), 2)}–{fmt(ld.get('max'), 2)} |"
        )
    L += medians(runs)
    L += ["", "## Every run", ""]
    for r in runs:
        ce = r["submit_to_chain_end_s"] or {}
        L += [
            f"### {r['mode']}, N = {r['n']} ({'ok' if r['ok'] else 'NOT OK'})",
            "",
            (
                f"- started {r.get('started_at')}, commit {r.get('git')}, load {r.get('loadavg_start')} → "
                f"{r.get('loadavg_end')}, {r['other_jobs_at_start']} other jobs queued at the start"
            ),
            (
                f"- submitting took {fmt(r['submit_s'])} s; last job left {fmt(r['submit_to_last_job_end_s'])} s "
                f"after the first submit; the first chain completed after {fmt(ce.get('min'))} s, the median one "
                f"after {fmt(ce.get('median'))} s; "
                f"sdiag counted {fmt(r['counting_window_s'])} s"
            ),
            (
                f"- runners' allocation {r['allocation']['runner_cpu_s']} CPU-s "
                f"(the last completion is {fmt(r['over_runner_allocation_bound'], 2)} × that over the slots), the rest "
                f"{r['allocation']['non_runner_cpu_s']} CPU-s: {r['allocation']['cpu_s_by_kind']}; jobs "
                f"{r['allocation']['jobs_by_kind']}, states {r['allocation']['job_states']}"
            ),
            (
                f"- RPCs: {r['rpcs_total']} = {r['rpcs_clients']} from clients + {r['rpcs_daemons']} from slurmd/"
                f"slurmdbd + {r['rpcs_bench_sdiag']} the bench's sdiag; by user {r['rpcs_by_user']}; "
                "sdiag jobs "
                + ", ".join(
                    f"{k} {v}" for k, v in r["sdiag"]["jobs"].items() if k not in ("jobs_pending", "jobs_running")
                )
            ),
            "- by type: " + ", ".join(f"{k} {v}" for k, v in r["sdiag"]["by_type"].items()),
        ]
        hk = r.get("hooks_s") or {}
        L.append(f"- the report hook per chain: median {fmt(hk.get('median'))} s, max {fmt(hk.get('max'))} s")
        if r.get("error") or r["not_completed"] or r["cancelled_by_bench"]:
            L.append(
                f"- **error**: {r.get('error', '-')}; not completed: {r['not_completed']}; "
                f"cancelled by the bench: {r['cancelled_by_bench']}"
            )
        L.append("")
    if results.get("remarks"):  # added to the JSON by hand after the run
        L += ["## Remarks (added after the run)", ""] + [f"- {x}" for x in results["remarks"]] + [""]
    return "\n".join(L)


def medians(runs: list[dict[str, Any]]) -> list[str]:
    """Where a mode and size ran more than once (``--repeat``): each ok run's
    ratio to the slot bound and their median, and beside relay's the ratio
    of its median to the dependency chains' of the same N (Slurm's floor)."""
    ratios: dict[tuple[str, int], list[float]] = {}
    for r in runs:
        if r["ok"] and r["over_slot_bound"] is not None:  # a run that lost a chain has no time to compare
            ratios.setdefault((r["mode"], r["n"]), []).append(r["over_slot_bound"])
    if all(len(v) < 2 for v in ratios.values()):
        return []
    L = ["", "## Medians", "", "| mode | N | runs | each run's ratio | median ratio | median over dependency's |"]
    L.append("|---|---|---|---|---|---|")
    for (mode, n), vals in ratios.items():
        floor = ratios.get((DEPENDENCY, n))
        over = statistics.median(vals) / statistics.median(floor) if floor and mode != DEPENDENCY else None
        L.append(
            f"| {mode} | {n} | {len(vals)} | {', '.join(fmt(v, 2) for v in vals)} "
            f"| **{fmt(statistics.median(vals), 2)} ×** | {fmt(over, 2)} |"
        )
    return L


def busy(r: dict[str, Any]) -> float | None:
    """Share of the slots' time from the first submit to the last completion
    that the sweep's jobs held (all their sacct CPU-seconds)."""
    a, span = r["allocation"], r["submit_to_last_completion_s"]
    return (a["runner_cpu_s"] + a["non_runner_cpu_s"]) / (r["slots"] * span) if span else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated (default %(default)s)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chains per sweep (default %(default)s)")
    ap.add_argument("--iters", type=int, default=10, help="MAX_ITER of each chain (default %(default)s)")
    ap.add_argument("--iter-seconds", type=float, default=1.0, help="ITER_SECONDS (default %(default)s)")
    ap.add_argument("--checkpoint-every", type=int, default=5, help="(default %(default)s)")
    ap.add_argument("--runner-time", default="0:15", help="(default %(default)s)")
    ap.add_argument("--runner-margin", type=int, default=5, help="(default %(default)s)")
    ap.add_argument("--step-aside-after", type=int, help="submitter mode's setting (default: chain's)")
    ap.add_argument(
        "--dependency-jobs",
        type=int,
        default=2,
        help=f"jobs a chain in mode {DEPENDENCY!r} (hand-written: fixed in advance; default %(default)s)",
    )
    ap.add_argument(
        "--app-python",
        default=sys.executable,
        help="the interpreter the app is started with, in every mode (default: the one running the bench, "
        "chain's own, as a user's app runs in the environment chain is installed in; python3 gives the "
        "runs before 2026-12-06, where python3 on PATH was pyenv's shim)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds: every mode and size once a round, in order, so that the modes' runs interleave "
        "(default %(default)s); the medians of each mode and size are tabled",
    )
    ap.add_argument("--parallel", type=int, default=4, help="submit_many's parallel (default %(default)s)")
    ap.add_argument("--poll", type=float, default=2.0, help="wait_all's poll, s (default %(default)s)")
    ap.add_argument("--check", type=float, default=120.0, help="wait_all's check, s (default %(default)s)")
    ap.add_argument(
        "--timeout", type=float, default=1200.0, help="wait_all's timeout per sweep, s (default %(default)s)"
    )
    ap.add_argument("--drain", type=float, default=180.0, help="wait for the jobs to leave, s (default %(default)s)")
    ap.add_argument("--work", default=str(BENCH / ".work"), help="scratch directory (default %(default)s)")
    ap.add_argument("--out", default=str(BENCH / "results"), help="results directory (default %(default)s)")
    ap.add_argument("--stem", help="results file name (default sweep-<date>)")
    ap.add_argument(
        "--rerender",
        metavar="JSON",
        help="recompute the hook times of an earlier results file "
        "from its work directories and write its table again (no Slurm jobs)",
    )
    args = ap.parse_args()
    if args.rerender:
        return rerender(Path(args.rerender))
    work = Workload(
        args.iters,
        args.iter_seconds,
        args.checkpoint_every,
        args.runner_time,
        args.runner_margin,
        args.step_aside_after,
        args.app_python,
    )
    if args.repeat < 1:
        log("--repeat: at least 1")
        return 2
    if real("sinfo", "-h", "-o", "%P").returncode != 0:
        log('the Slurm controller does not answer: bash scripts/dev-cluster up; eval "$(bash scripts/dev-cluster env)"')
        return 2
    base = Path(args.work) / time.strftime("%Y-%m-%dT%H%M%S")
    bytecode = compile_chain()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "git_at_start": git_commit(),
        "loadavg_at_start": loadavg(),
        "cluster": f"{real('sinfo', '-V').stdout.strip()}, MinJobAge {min_job_age()}",
        "python": sys.executable,
        "workload": asdict(work),
        "bytecode": bytecode,
        "args": vars(args),
        "runs": [],
    }
    stem = args.stem or f"sweep-{time.strftime('%Y-%m-%d')}"
    for sig in (signal.SIGINT, signal.SIGTERM):  # a run interrupted still cancels its chains (finally)
        signal.signal(sig, interrupted)
    try:
        for k in range(1, args.repeat + 1):
            # a round's work directories apart from another's (a run's are named by its mode and N)
            where = base if args.repeat == 1 else base / f"round-{k}"
            for mode in args.modes.split(","):
                for n in (int(x) for x in args.sizes.split(",")):
                    results["runs"].append(dict(run_sweep(where, mode.strip(), n, work, args), round=k))
                    save(Path(args.out), stem, results, final=False)
    except KeyboardInterrupt:
        results["interrupted"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        log("interrupted: the runs so far are saved")
    save(Path(args.out), stem, results, final=True)
    return 0 if all(r["ok"] for r in results["runs"]) and "interrupted" not in results else 1


def compile_chain() -> str:
    """Which chain the jobs run, as the results say it: they start
    ``sys.executable -m chain`` in this environment, so the one that Python
    imports from outside the checkout (this process imports the checkout's,
    ``bench/status.py``). An installed copy (``pip install .`` into a throw-away
    venv, as a user installs a wheel) must be this checkout's, file for file,
    or the figures would name the wrong commit; pip compiled it. A checkout
    on ``PYTHONPATH`` is compiled here, as pip compiles an installed wheel: a
    job that inherits ``PYTHONDONTWRITEBYTECODE`` (this machine sets it)
    never writes bytecode, and every runner and app would compile chain from
    source again (~70 ms of CPU a runner). An editable install's import hook
    is named: it costs every Python start, the runner's and the app's, ~12 ms
    more CPU than a wheel's (measured here)."""
    probe = (
        "import chain, sys; print(chain.__file__); "
        "print(any('__editable__' in str(getattr(f, '__module__', '')) for f in sys.meta_path))"
    )
    found = subprocess.run([sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise SystemExit(
            f"bench: {sys.executable} cannot import chain outside the checkout: install it (pip install .)"
        )
    where, hook = found.stdout.splitlines()[-2:]
    package = Path(where).resolve().parent
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    note = "; an editable install's import hook is active (each Python start pays it)" if hook == "True" else ""
    if package == (ROOT / "chain").resolve():
        done = subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=False)
        return (
            f"chain/ of this checkout, compiled before the runs (compileall: {'ok' if done.returncode == 0 else 'failed'}), "
            f"as pip compiles an installed wheel; PYTHONDONTWRITEBYTECODE={flag or 'unset'} in the jobs' environment{note}"
        )
    # the package's files as the wheel ships them: its modules and shell helpers, and templates/ as chain/templates
    shipped = [(src, src.relative_to(ROOT / "chain")) for src in (ROOT / "chain").rglob("*") if _shipped(src)]
    shipped += [(src, Path("templates", src.name)) for src in (ROOT / "templates").glob("*.j2")]
    differ = [
        str(src.relative_to(ROOT))
        for src, rel in sorted(shipped)
        if not (package / rel).is_file() or (package / rel).read_bytes() != src.read_bytes()
    ]
    if differ:
        raise SystemExit(
            f"bench: the chain the jobs would import ({package}) is not this checkout's "
            f"({len(differ)} files differ, {differ[0]} first): pip install . into {sys.prefix} again"
        )
    return f"chain installed from this checkout (pip install ., a wheel, compiled by pip) at {package}{note}"


def _shipped(path: Path) -> bool:
    """A file of chain/ that an install holds too (not bytecode)."""
    return path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"


def rerender(path: Path) -> int:
    results = json.loads(path.read_text())
    for r in results["runs"]:
        r["hooks_s"] = hook_seconds(sorted(Path(r["workdir"]).glob("c[0-9]*"))) or r.get("hooks_s")
    write_results(path.parent, path.stem, results, render(results))
    return 0


def interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def save(out: Path, stem: str, results: dict[str, Any], *, final: bool) -> None:
    """The results so far (after every run: an interrupted benchmark keeps them)."""
    results["git_at_end"], results["loadavg_at_end"] = git_commit(), loadavg()
    if final:
        write_results(out, stem, results, render(results))
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
