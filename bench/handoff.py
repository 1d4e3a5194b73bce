#!/usr/bin/env python3
"""Handoff benchmark: the seed scripts vs a pre-submitted dependency chain vs chain.

Runs the same app (examples/python/app.py: 1 iteration/s, checkpoint every 5,
60 iterations, runner window 20 s = 30 s limit - 10 s margin) on the real
Slurm cluster three ways (chain in both its modes: a submitter job, and
``--mode relay`` with none), measures handoff latency from the app's own
iteration log, whole-chain wall time, Slurm client calls (counted by
wrapper scripts first on PATH) and the allocation cost of the jobs that are
not app runs (sacct), then times ``chain status`` on a synthetic chain
directory of 10 000 runners.  Prints a markdown table and writes
bench/results/<date>.json and .md (``--stem`` to name them otherwise), with
the machine, the git commit measured and the load average around every run.
See bench/README.md.

Not part of the test suite.  Needs the dev cluster:
    bash scripts/dev-cluster up; eval "$(bash scripts/dev-cluster env)"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from status import section as status_section
from status import status_bench
from status import target_rows as status_target_rows

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SEED = BENCH / "seed"
APP = ROOT / "examples" / "python" / "app.py"
PY = sys.executable  # the interpreter with chain installed; its bin dir goes on PATH
REAL_BIN = "/usr/bin"
WRAPPED = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "srun")
SLURMCTLD_LOG = Path(os.environ.get("CHAIN_DEV_CLUSTER_DIR", "/var/lib/chain-dev-cluster")) / "log" / "slurmctld.log"

MAX_ITER = 60
CHECKPOINT_EVERY = 5
ITER_SECONDS = 1.0
RUNNER_LIMIT = 30  # seconds
RUNNER_MARGIN = 10  # seconds -> 20 s window
PURE_COMPUTE = MAX_ITER * ITER_SECONDS

SYSTEMS = {
    "c": "chain (submitter-time default 3:30)",
    "c_long": "chain (--submitter-time 30:00, no restart)",
    "c_restart": "chain (--submitter-time 2:00 --submitter-margin 75: restarts mid-chain)",
    "c_relay": "chain --mode relay (no submitter job; each runner queues its successor)",
    "b": "pre-submitted --dependency=afterany chain (seed runner)",
    "a": "seed scripts (checkpoint_submitter.sh + checkpoint_runner.sh)",
}
DEFAULT_ORDER = ["c", "c_relay", "c_long", "c_restart", "b", "a"]
CHAIN_SYSTEMS = ("c", "c_relay", "c_long", "c_restart")
# the chain's extra flags per system (on top of run_chain's common ones)
CHAIN_EXTRA = {
    "c": [],
    "c_relay": ["--mode", "relay"],
    "c_long": ["--submitter-time", "30:00"],
    "c_restart": ["--submitter-time", "2:00", "--submitter-margin", "75"],
}
FAULT_FLAG = Path("/tmp/FAULT_SUITE_RUNNING")  # a fault suite is stopping slurmctld: no timed run then

# The seed's `module load` lines need a `module` command (Lmod), which this
# cluster lacks: an exported no-op bash function, propagated by sbatch, makes
# them succeed without touching the scripts.
NOOP_MODULE = {"BASH_FUNC_module%%": "() {  :\n}"}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def real(cmd: str, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """A Slurm client call by the benchmark itself (not counted)."""
    return subprocess.run([f"{REAL_BIN}/{cmd}", *args], capture_output=True, text=True, check=check)


# --------------------------------------------------------------------------- provenance, load, fault suite
def git_commit() -> dict[str, Any]:
    """The commit measured: short HEAD, "+dirty" when chain/ has uncommitted
    changes (the jobs run this checkout's chain/ as it is: editable install),
    and ``git status --short chain/`` itself."""

    def git(*args: str) -> str:
        p = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        return p.stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--short", "chain/")
    diff = git("diff", "HEAD", "--", "chain/") + "\n" + git("ls-files", "--others", "--exclude-standard", "chain/")
    return {
        "commit": head + ("+dirty" if dirty else ""),
        "head": head,
        "git_status_short_chain": dirty.splitlines(),
        "chain_diff_sha256_12": hashlib.sha256(diff.encode()).hexdigest()[:12] if dirty else "",
        "at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def machine() -> dict[str, Any]:
    try:
        debian = Path("/etc/debian_version").read_text().strip()
    except OSError:
        debian = "?"
    return {
        "nproc": os.cpu_count(),
        "debian_version": debian,
        "slurm": real("sinfo", "-V").stdout.strip(),
        "hostname": os.uname().nodename,
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def wait_no_fault_suite(poll: float = 5.0) -> float:
    """Wait while a fault suite runs (it stops slurmctld); seconds waited."""
    t0 = time.time()
    if FAULT_FLAG.exists():
        log(f"{FAULT_FLAG} exists: a fault suite is stopping slurmctld; waiting")
    while FAULT_FLAG.exists():
        time.sleep(poll)
    return time.time() - t0


class FaultWatch:
    """Notices a fault suite starting during a timed run (checked every second)."""

    def __init__(self) -> None:
        self.seen: list[float] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._halt.wait(1.0):
            if FAULT_FLAG.exists():
                self.seen.append(time.time())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=5)


def timed(run: Any, note_to: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``run()`` after any fault suite, recording the load average at
    start and end and whether a fault suite overlapped it (then the run is
    not ok: discard it)."""
    note_to["waited_for_fault_suite_s"] = round(wait_no_fault_suite(), 1)
    git = git_commit()
    note_to["git"], note_to["git_status_short_chain"] = git["commit"], git["git_status_short_chain"]
    note_to["git_chain_diff_sha256_12"] = git["chain_diff_sha256_12"]
    note_to["loadavg_start"] = loadavg()
    note_to["started_at"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    fw = FaultWatch()
    fw.start()
    try:
        out = run(*args, **kwargs)
    finally:
        fw.stop()
    note_to["loadavg_end"] = loadavg()
    note_to["overlapped_fault_suite"] = bool(fw.seen)
    if fw.seen:
        note_to["fault_suite_seen"] = [time.strftime("%H:%M:%S", time.localtime(t)) for t in (fw.seen[0], fw.seen[-1])]
    return out


# --------------------------------------------------------------------------- setup
@dataclass
class Workspace:
    name: str
    dir: Path
    env: dict[str, str]
    calls_file: Path
    t_submit: float = 0.0
    t_submitted: float = 0.0  # the submitting command(s) returned: later calls come from jobs
    t_done: float | None = None
    done_how: str = ""
    jobs: list[str] = field(default_factory=list)
    submitter_job: str = ""
    notes: list[str] = field(default_factory=list)
    ok: bool = True
    chain_id: str = ""
    submitter_jobs: list[str] = field(default_factory=list)  # every submitter job (chain) / the seed's


def make_workspace(base: Path, name: str) -> Workspace:
    d = base / name
    if d.exists():
        shutil.rmtree(d)
    (d / "bin").mkdir(parents=True)
    shutil.copy(APP, d / "app.py")
    calls = d / "slurm_calls.log"
    calls.touch()
    for cmd in WRAPPED:
        w = d / "bin" / cmd
        w.write_text(
            "#!/bin/bash\n"
            "# bench wrapper: count the call, then run the real client\n"
            f'printf \'%s %s %s %s\\n\' "$EPOCHREALTIME" "${{SLURM_JOB_ID:--}}" {cmd} "$*" '
            '>> "${BENCH_CALLS_FILE:-/dev/null}"\n'
            f'exec {REAL_BIN}/{cmd} "$@"\n'
        )
        w.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_")) or k == "SLURM_CONF"}
    env["PATH"] = f"{d / 'bin'}:{Path(PY).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env["BENCH_CALLS_FILE"] = str(calls)
    env["ITER_SECONDS"] = str(ITER_SECONDS)
    for k in ("CHAIN_DIR", "MAX_ITER", "APP_CMD", "CKPT_PATH", "CHECKPOINT_EVERY"):
        env.pop(k, None)
    return Workspace(name, d, env, calls)


def sacct_times(job: str) -> dict[str, Any]:
    p = real("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobIDRaw,State,ExitCode,Submit,Start,End")
    for line in p.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 6 and parts[0] == job:

            def ts(s: str) -> float | None:
                try:
                    return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%S"))
                except ValueError:
                    return None

            return {
                "state": parts[1],
                "exit": parts[2],
                "submit": ts(parts[3]),
                "start": ts(parts[4]),
                "end": ts(parts[5]),
            }
    return {}


def job_end_time(job: str, what: str) -> tuple[float, str]:
    """End of a job: slurmctld.log's _job_complete (ms), else sacct End (1 s)."""
    t = ctld_events([job])[job].get("complete")
    if t:
        return t, f"slurmctld.log _job_complete of {what}"
    end = sacct_times(job).get("end")
    if end:
        return end, f"sacct End of {what} (1 s resolution)"
    return time.time(), f"seen ended by the benchmark ({what})"


def min_job_age() -> str:
    m = re.search(r"MinJobAge\s*=\s*(\S+ \S+)", real("scontrol", "show", "config").stdout)
    return m.group(1) if m else "?"


def job_state(job: str) -> str:
    p = real("squeue", "-h", "--states=all", "-j", job, "-o", "%T")
    state = p.stdout.strip()
    if state:
        return state
    return str(sacct_times(job).get("state", "UNKNOWN"))


ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING"}


def wait_job_end(job: str, deadline: float, every: float = 2.0) -> bool:
    while time.time() < deadline:
        st = job_state(job)
        if st.split()[0] not in ACTIVE and st != "UNKNOWN":
            return True
        time.sleep(every)
    return False


# --------------------------------------------------------------------------- a chain's submit and end
def submit_chain(ws: Workspace, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``chain submit`` (ARGV) in the workspace, timing it; a failure
    marks the workspace not ok with sbatch's words."""
    ws.t_submit = time.time()
    p = subprocess.run(argv, cwd=ws.dir, env=ws.env, capture_output=True, text=True, check=False)
    ws.t_submitted = time.time()
    log(f"{ws.name}: {p.stdout.strip()} {p.stderr.strip()}")
    if p.returncode != 0:
        ws.ok = False
        ws.notes.append(f"chain submit failed: {p.stderr.strip()}")
    return p


def wait_state(path: Path, deadline: float, *, poll: float) -> dict[str, Any]:
    """The chain's state.json once the chain has ended, or the last one read at DEADLINE."""
    state: dict[str, Any] = {}
    while time.time() < deadline:
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("state") in ("completed", "failed", "stopped", "cancelled"):
            break
        time.sleep(poll)
    return state


# --------------------------------------------------------------------------- the three systems
def run_chain(ws: Workspace, extra: list[str], timeout: float) -> None:
    argv = [
        PY,
        "-m",
        "chain",
        "submit",
        "--max-iter",
        str(MAX_ITER),
        "--app-cmd",
        "python3 app.py",
        "--checkpoint-every",
        str(CHECKPOINT_EVERY),
        "--runner-time",
        f"0:{RUNNER_LIMIT}",
        "--runner-margin",
        str(RUNNER_MARGIN),
        "--backend",
        "slurm",
        "--partition",
        "debug",
        *extra,
    ]
    ws.notes.append("command: " + " ".join(argv[1:]))
    p = submit_chain(ws, argv)
    m = re.search(r"submitter job (\d+)", p.stdout + p.stderr)
    ws.submitter_job = m.group(1) if m else ""
    if p.returncode != 0:
        return
    state = wait_state(ws.dir / ".chain" / "state.json", ws.t_submit + timeout, poll=0.25)
    if state.get("state") != "completed":
        ws.ok = False
        ws.notes.append(f"chain ended {state.get('state')!r}: {state.get('reason', '')}")
        subprocess.run([PY, "-m", "chain", "cancel"], cwd=ws.dir, env=ws.env, capture_output=True, check=False)
    ws.t_done, ws.done_how = chain_done(state)
    ws.chain_id = str(state.get("chain_id", ""))
    # let the jobs still running (the submitter, or in relay mode the last
    # runner) exit so their last calls are counted and sacct has their end
    wait_chain_jobs(ws, time.time() + 60)
    ws.jobs = read_ids(ws.dir / ".chain" / "worker_ids.txt")
    ws.submitter_jobs = read_ids(ws.dir / ".chain" / "submitter_ids.txt")


def chain_done(state: dict[str, Any]) -> tuple[float, str]:
    """When a chain was done: its state turned completed after the completion
    hooks. ``completed_at`` is stamped when the counter is found at MAX_ITER,
    before the hooks run, so the end of the last hook is taken when later."""
    done = float(state.get("completed_at") or time.time())
    ends = [float(h["ended"]) for h in state.get("hooks", []) if isinstance(h, dict) and h.get("ended")]
    if ends and max(ends) > done:
        return max(ends), "state.json: the last completion hook's end (completed_at is stamped before the hooks)"
    return done, "state.json completed_at"


def read_ids(path: Path) -> list[str]:
    try:
        return [x.strip() for x in path.read_text().split() if x.strip()]
    except OSError:
        return []


def chain_job_ids(ws: Workspace) -> list[str]:
    """Every Slurm job id of a chain: the job ids in chain.log (submitters,
    runners, pre-queued runners), worker_ids.txt and submitter_ids.txt."""
    cd = ws.dir / ".chain"
    try:
        ids = set(re.findall(r"\bjob (\d+)", (cd / "chain.log").read_text()))
    except OSError:
        ids = set()
    ids |= set(read_ids(cd / "worker_ids.txt")) | set(read_ids(cd / "submitter_ids.txt"))
    return sorted(ids, key=int)


def wait_chain_jobs(ws: Workspace, deadline: float) -> list[str]:
    """Wait for the chain's running jobs to end (a job still PENDING then is
    a leftover: returned, not waited for)."""
    while True:
        ids = chain_job_ids(ws)
        rows = real("squeue", "-h", "-j", ",".join(ids), "-o", "%i %T").stdout.split("\n") if ids else []
        states = dict(r.split() for r in rows if len(r.split()) == 2)
        running = [j for j, st in states.items() if st != "PENDING"]
        if not running or time.time() >= deadline:
            return [j for j, st in states.items() if st == "PENDING"]
        time.sleep(1.0)


def seed_env(ws: Workspace) -> dict[str, str]:
    env = dict(ws.env)
    env.update(NOOP_MODULE)
    env.update(
        MAX_ITER=str(MAX_ITER),
        CHECKPOINT_EVERY=str(CHECKPOINT_EVERY),
        CKPT_PATH="state_iter.txt",
        # `bash -lc` (the seed runner) resets PATH from /etc/profile: name the
        # interpreter with chain installed explicitly (same python as chain's runs).
        APP_CMD=f"{PY} app.py",
        # "30" would be 30 *minutes* in the seed's to_seconds(); 0:30 is MM:SS.
        RUNNER_TIME_LIMIT=f"0:{RUNNER_LIMIT}",
        RUNNER_MARGIN_SEC=str(RUNNER_MARGIN),
        # Long enough that the seed submitter never self-restarts during the
        # ~25 min run (the default 3:30 would restart it every 150 s).
        SUBMITTER_TIME_LIMIT="2:00:00",
        SUBMITTER_MARGIN_SEC="60",
    )
    return env


def run_dependency_chain(ws: Workspace, timeout: float) -> None:
    env = seed_env(ws)
    shutil.copy(SEED / "checkpoint_runner.sh", ws.dir / "checkpoint_runner.sh")
    # each seed runner does ~window-1 iterations (TERM at 20 s, python start-up)
    n = math.ceil(MAX_ITER / (RUNNER_LIMIT - RUNNER_MARGIN - 3)) + 1
    ws.notes.append(
        f"{n} runners submitted up front with --dependency=afterany:<previous>; "
        "the unused ones are scancel'ed once the app exits 0"
    )
    ws.t_submit = time.time()
    prev = ""
    for _ in range(n):
        argv = ["sbatch", "--parsable"] + ([f"--dependency=afterany:{prev}"] if prev else []) + ["checkpoint_runner.sh"]
        p = subprocess.run(argv, cwd=ws.dir, env=env, capture_output=True, text=True, check=True)
        prev = p.stdout.strip().split(";")[0]
        ws.jobs.append(prev)
    ws.t_submitted = time.time()
    log(f"b: submitted {ws.jobs}")
    deadline = ws.t_submit + timeout
    done_run = None
    while time.time() < deadline and done_run is None:
        runs = parse_iterlog(ws.dir / "iterations.log")
        done_run = next((r for r in runs if r.code == 0), None)
        time.sleep(0.25)
    if done_run is None:
        ws.ok = False
        ws.notes.append("app never exited 0")
    last = done_run.job if done_run else ws.jobs[-1]
    for j in ws.jobs[ws.jobs.index(last) + 1 if last in ws.jobs else len(ws.jobs) :]:
        real("scancel", j)
    wait_job_end(last, time.time() + 120, every=1.0)
    ws.jobs = ws.jobs[: ws.jobs.index(last) + 1] if last in ws.jobs else ws.jobs
    time.sleep(2)
    ws.t_done, ws.done_how = job_end_time(last, "the last runner")


def run_seed(ws: Workspace, timeout: float) -> None:
    env = seed_env(ws)
    # The wiki's instructions: copies of both scripts in the working directory.
    shutil.copy(SEED / "checkpoint_runner.sh", ws.dir / "checkpoint_runner.sh")
    shutil.copy(SEED / "checkpoint_submitter.sh", ws.dir / "checkpoint_submitter.sh")
    ws.t_submit = time.time()
    p = subprocess.run(
        ["sbatch", "--parsable", "checkpoint_submitter.sh"],
        cwd=ws.dir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    sub = p.stdout.strip().split(";")[0]
    ws.t_submitted = time.time()
    log(f"a: seed submitter job {sub}; this takes ~20-25 min (the squeue loop waits for MinJobAge)")
    ok = wait_job_end(sub, ws.t_submit + timeout, every=5.0)
    if not ok:
        ws.ok = False
        ws.notes.append("seed submitter did not finish in time; cancelled")
        real("scancel", sub)
    info = sacct_times(sub)
    if info.get("state") != "COMPLETED":
        ws.ok = False
        ws.notes.append(f"seed submitter ended {info.get('state')} {info.get('exit')}")
    ws.t_done, ws.done_how = job_end_time(sub, "the seed submitter")
    ids = ws.dir / "worker_ids.txt"
    ws.jobs = ids.read_text().split() if ids.exists() else []
    ws.submitter_jobs = [sub]
    ws.notes.append(f"submitter job {sub}")


# --------------------------------------------------------------------------- measurement
@dataclass
class Run:
    job: str
    pid: str
    start: float
    start_iter: int
    exit: float | None = None
    code: int | None = None
    end_iter: int | None = None
    iters: int = 0


def parse_iterlog(path: Path) -> list[Run]:
    runs: dict[tuple[str, str], Run] = {}
    order: list[Run] = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        f = line.split()
        if len(f) < 5:
            continue
        ts, ev, it, job, pid = float(f[0]), f[1], int(f[2]), f[3], f[4]
        key = (job, pid)
        if ev == "start":
            runs[key] = Run(job, pid, ts, it)
            order.append(runs[key])
        elif key in runs:
            r = runs[key]
            if ev == "iter":
                r.iters += 1
            elif ev == "exit":
                r.exit, r.end_iter = ts, it
                r.code = int(f[5]) if len(f) > 5 else None
    return order


def parse_calls(path: Path) -> list[tuple[float, str, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        f = line.split(" ", 3)
        if len(f) >= 3:
            out.append((float(f[0]), f[1], f[2], f[3] if len(f) > 3 else ""))
    return out


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def write_results(out: Path, stem: str, results: dict[str, Any], table: str) -> None:
    """bench/results/<stem>.json (raw) and .md (the table); print the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (out / f"{stem}.md").write_text(table)
    print(table)
    log(f"wrote {out / stem}.json and .md")


def measure(ws: Workspace, label: str | None = None) -> dict[str, Any]:
    runs = parse_iterlog(ws.dir / "iterations.log")
    # up to (and including) the run that finished the work
    used: list[Run] = []
    for r in runs:
        used.append(r)
        if r.code == 0:
            break
    handoffs = [round(b.start - a.exit, 3) for a, b in pairwise(used) if a.exit is not None]
    first = used[0].start if used else None
    last = used[-1].exit if used else None
    calls = parse_calls(ws.calls_file)
    in_chain = [c for c in calls if c[0] >= ws.t_submit]
    running = [c for c in calls if any(r.exit and r.start <= c[0] <= r.exit for r in used)]
    runner_hours = sum((r.exit - r.start) for r in used if r.exit) / 3600
    by_cmd: dict[str, int] = {}
    by_caller: dict[str, int] = {}
    relay = ws.name == "c_relay"
    for c in in_chain:
        by_cmd[c[2]] = by_cmd.get(c[2], 0) + 1
        # chain strips SLURM_* from sbatch's environment, so a submitter's (or, in
        # relay mode, a runner's) sbatch shows no job id
        caller = (
            ("login" if c[0] <= ws.t_submitted else "runner" if relay else "submitter")
            if c[1] == "-"
            else ("runner" if c[1] in ws.jobs else "submitter")
        )
        by_caller[caller] = by_caller.get(caller, 0) + 1
    span = (last - first) if first and last else None
    if ws.name.startswith("c") and ws.ok:
        try:  # the definition of done as chain_done has it now (an earlier result may predate it)
            ws.t_done, ws.done_how = chain_done(json.loads((ws.dir / ".chain" / "state.json").read_text()))
        except (OSError, ValueError):
            pass
    s2d = (ws.t_done - ws.t_submit) if ws.t_done else None
    # the last of the run's jobs (submitter, runners) to leave its allocation, from slurmctld.log
    ids = (chain_job_ids(ws) if ws.name.startswith("c") else []) + ws.jobs + ws.submitter_jobs
    job_ends = [e["complete"] for e in ctld_events(sorted(set(ids))).values() if e.get("complete")]
    last_job_end = max(job_ends) if job_ends else None
    total_iters = sum(r.iters for r in used)
    res: dict[str, Any] = {
        "system": ws.name,
        "label": label or SYSTEMS[ws.name],
        "ok": ws.ok,
        "notes": ws.notes,
        "workdir": str(ws.dir),
        "runners": len(used),
        "app_exit_codes": [r.code for r in used],
        "iterations_computed": total_iters,
        "iterations_recomputed": total_iters - MAX_ITER,
        "handoffs_s": handoffs,
        "handoff_median_s": med(handoffs),
        "handoff_max_s": max(handoffs) if handoffs else None,
        "first_start_to_last_exit_s": span,
        "span_over_compute": span / PURE_COMPUTE if span else None,
        "submit_to_first_app_start_s": (first - ws.t_submit) if first else None,
        "last_app_exit_to_done_s": (ws.t_done - last) if last and ws.t_done else None,
        "submit_to_done_s": s2d,
        "submit_to_done_over_compute": s2d / PURE_COMPUTE if s2d else None,
        "done_measured_by": ws.done_how,
        "submit_to_last_job_end_s": (last_job_end - ws.t_submit) if last_job_end else None,
        "done_to_last_job_end_s": (last_job_end - ws.t_done) if last_job_end and ws.t_done else None,
        "slurm_calls_total": len(in_chain),
        "slurm_calls_by_command": by_cmd,
        "slurm_calls_by_caller": by_caller,
        "slurm_calls_while_runner_runs": len(running),
        "runner_hours": runner_hours,
        "calls_per_runner_hour_measured": len(running) / runner_hours if runner_hours else None,
        "calls_per_runner_hour_total": len(in_chain) / runner_hours if runner_hours else None,
        "jobs": ws.jobs,
        "runs": [r.__dict__ for r in used],
        "workspace": {
            "t_submit": ws.t_submit,
            "t_submitted": ws.t_submitted,
            "t_done": ws.t_done,
            "done_how": ws.done_how,
            "submitter_job": ws.submitter_job,
            "jobs": ws.jobs,
            "ok": ws.ok,
            "notes": ws.notes,
            "chain_id": ws.chain_id,
            "submitter_jobs": ws.submitter_jobs,
        },
    }
    if ws.name.startswith("c"):
        res["handoff_breakdown"] = (relay_breakdown if relay else chain_breakdown)(ws, used, calls)
        res["start_breakdown"] = chain_start(ws, used, calls)
    res["chain_id"] = ws.chain_id
    res["cost"] = sacct_cost(ws, {r.job for r in runs})
    if relay and used:
        runner_calls = [c for c in in_chain if c[0] > ws.t_submitted]
        res["relay_calls_per_runner"] = len(runner_calls) / len(used)
    return res


SACCT_COST_FIELDS = ("JobIDRaw", "JobName", "State", "AllocCPUS", "ElapsedRaw", "CPUTimeRaw", "Start", "End")


def sacct_cost(ws: Workspace, ran_app: set[str]) -> dict[str, Any]:
    """Allocation cost from sacct: allocated CPU-seconds (CPUTimeRaw =
    AllocCPUS x ElapsedRaw) of the runs' jobs that did not run the app
    (submitters; runners that only judged, were superseded or were
    cancelled) over those of the runner jobs that ran the app.

    The jobs: the chain's ids (chain.log, worker_ids.txt, submitter_ids.txt)
    or the seed's, plus (chain) every job of this user since the submit whose
    name starts with ``<chain_id>.`` (chain names its jobs ``<id>.s<cycle>`` and
    ``<id>.r<seq>``: chain/core/names.py). Waits (≤ 30 s) until sacct shows
    none of them running: a running job's CPUTimeRaw grows."""
    ids = set(chain_job_ids(ws) if ws.name.startswith("c") else []) | set(ws.jobs) | set(ws.submitter_jobs)
    ids.discard("")
    fmt_ = ",".join(SACCT_COST_FIELDS)
    rows: dict[str, dict[str, str]] = {}
    deadline = time.time() + 30
    while True:
        rows = {}
        queries = [["-j", ",".join(sorted(ids, key=int))]] if ids else []
        if ws.chain_id:
            queries.append(["-S", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ws.t_submit - 5))])
        for q in queries:
            out = real("sacct", "-X", "-n", "-P", *q, "-o", fmt_).stdout
            for line in out.splitlines():
                row = dict(zip(SACCT_COST_FIELDS, line.split("|")))
                if len(row) != len(SACCT_COST_FIELDS):
                    continue
                if row["JobIDRaw"] in ids or (ws.chain_id and row["JobName"].startswith(ws.chain_id + ".")):
                    rows[row["JobIDRaw"]] = row
        active = [j for j, r in rows.items() if r["State"].split()[0] in ACTIVE and r["State"] != "PENDING"]
        if not active or time.time() >= deadline:
            break
        time.sleep(2)
    jobs: list[dict[str, Any]] = []
    for j, r in sorted(rows.items(), key=lambda kv: int(kv[0])):
        suffix = r["JobName"][len(ws.chain_id) :] if ws.chain_id and r["JobName"].startswith(ws.chain_id) else ""
        kind = (
            "runner, ran the app"
            if j in ran_app
            else "submitter"
            if j in ws.submitter_jobs or re.fullmatch(r"\.s\d+", suffix)
            else "runner, no app"
            if j in ws.jobs or re.fullmatch(r"\.r\d+", suffix)
            else "other job of the chain"
        )
        jobs.append(
            {
                "job": j,
                "name": r["JobName"],
                "state": r["State"],
                "alloc_cpus": int(r["AllocCPUS"] or 0),
                "elapsed_s": int(r["ElapsedRaw"] or 0),
                "cpu_s": int(r["CPUTimeRaw"] or 0),
                "kind": kind,
            }
        )
    runner_cpu = sum(x["cpu_s"] for x in jobs if x["kind"] == "runner, ran the app")
    other_cpu = sum(x["cpu_s"] for x in jobs if x["kind"] != "runner, ran the app")
    by_kind: dict[str, int] = {}
    for x in jobs:
        by_kind[x["kind"]] = by_kind.get(x["kind"], 0) + x["cpu_s"]
    return {
        "jobs": jobs,
        "runner_cpu_s": runner_cpu,
        "non_runner_cpu_s": other_cpu,
        "cpu_s_by_kind": by_kind,
        "ratio": other_cpu / runner_cpu if runner_cpu else None,
        "still_running_in_sacct": [x["job"] for x in jobs if x["state"] in ("RUNNING", "COMPLETING")],
        "how": "sacct -X -o " + ",".join(SACCT_COST_FIELDS),
    }


def ctld_events(job_ids: list[str]) -> dict[str, dict[str, float]]:
    """submit / allocate / complete times (ms) of jobs from slurmctld.log, if readable."""
    out: dict[str, dict[str, float]] = {j: {} for j in job_ids}
    try:
        text = SLURMCTLD_LOG.read_text(errors="replace")
    except OSError:
        return out
    pat = re.compile(r"^\[(\S+?)(\.\d+)?\] (.*?JobId=(\d+)\b.*)$")
    for line in text.splitlines():
        m = pat.match(line)
        if not m or m.group(4) not in out:
            continue
        try:
            t = time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + float(m.group(2) or 0)
        except ValueError:
            continue
        msg, ev = m.group(3), out[m.group(4)]
        if "_slurm_rpc_submit_batch_job" in msg:
            ev.setdefault("submit", t)
        elif "sched: Allocate" in msg or "Started JobId" in msg:
            ev.setdefault("allocate", t)
            ev.setdefault("allocated_by_backfill", 1.0 if "backfill" in msg else 0.0)
        elif "_job_complete" in msg and "done" in msg:
            ev.setdefault("complete", t)
    return out


def span(x: float | None, y: float | None) -> float | None:
    """y - x in seconds (ms precision), None when either is unknown."""
    return round(y - x, 3) if x is not None and y is not None else None


@dataclass
class Handoff:
    """Runner a's app exited (at ``exit``) and runner b's started: a's runner
    record ({} when unreadable) and both jobs' slurmctld events."""

    a: Run
    b: Run
    exit: float
    rec_a: dict[str, Any]
    ev_a: dict[str, float]
    ev_b: dict[str, float]


def handoffs(ws: Workspace, used: list[Run]) -> list[Handoff]:
    """Each handoff between consecutive runs, where the first one's app exit is known."""
    records = ws.dir / ".chain" / "runners"
    ctld = ctld_events([r.job for r in used])
    out = []
    for a, b in pairwise(used):
        if a.exit is None:
            continue
        try:
            rec_a = json.loads((records / f"{a.job}.json").read_text())
        except (OSError, ValueError):
            rec_a = {}
        out.append(Handoff(a, b, a.exit, rec_a, ctld.get(a.job, {}), ctld.get(b.job, {})))
    return out


def chain_breakdown(ws: Workspace, used: list[Run], calls: list[tuple[float, str, str, str]]) -> list[dict[str, Any]]:
    """Where each chain handoff's time goes, from precise timestamps:
    the app's log, the runner records, the wrapper call log, slurmctld.log."""
    out = []
    for h in handoffs(ws, used):
        a, b, rec_end, ev_a, ev_b = h.a, h.b, h.rec_a.get("end"), h.ev_a, h.ev_b
        sub_calls = [
            c for c in calls if c[1] not in (a.job, b.job) and c[0] > ws.t_submitted and h.exit <= c[0] <= b.start
        ]
        first_q = next((c[0] for c in sub_calls if c[2] == "squeue"), None)
        sbatch = next((c[0] for c in sub_calls if c[2] == "sbatch" and "submitter.sbatch" not in c[3]), None)
        runner_q = next((c[0] for c in calls if c[1] == b.job and c[2] == "squeue"), None)
        q_between = [c for c in sub_calls if sbatch is None or c[0] <= sbatch]
        out.append(
            {
                "from_job": a.job,
                "to_job": b.job,
                "handoff_s": span(h.exit, b.start),
                "app_exit_to_runner_record_end": span(h.exit, rec_end),
                "record_end_to_submitter_first_squeue (file poll 0.25 s)": span(rec_end, first_q),
                "first_squeue_to_sbatch (wait for job to leave the queue + sacct)": span(first_q, sbatch),
                "runner_job_complete_in_slurmctld_after_app_exit": span(h.exit, ev_a.get("complete")),
                "slurm_calls_between_record_and_sbatch": [f"{c[2]}@{c[0] - h.exit:+.2f}" for c in q_between],
                "sbatch_to_allocate (scheduler)": span(sbatch, ev_b.get("allocate")),
                "allocated_by": {1.0: "backfill", 0.0: "main"}.get(ev_b.get("allocated_by_backfill", -1), "-"),
                "allocate_to_runner_squeue (job launch + chain runner python start)": span(
                    ev_b.get("allocate"), runner_q
                ),
                "runner_squeue_to_app_start (end_time query, record, bash -c, app python start)": span(
                    runner_q, b.start
                ),
                "sbatch_to_app_start": span(sbatch, b.start),
            }
        )
    return out


def relay_breakdown(ws: Workspace, used: list[Run], calls: list[tuple[float, str, str, str]]) -> list[dict[str, Any]]:
    """Where a relay handoff's time goes. Runner b was queued (afterany) by
    runner a when a started; a's app exits, a records its end, judges its own
    outcome (after_app) and its job completes; Slurm releases b's dependency
    and allocates it; b starts Python, judges a (scheduler query), queues its
    own successor (sbatch), asks for its end time, starts the app. A runner's
    sbatch runs with SLURM_* stripped, so it is logged without a job id: it is
    the runner.sbatch submission between b's allocation and b's app start."""
    out = []
    for h in handoffs(ws, used):
        a, b, ev_a, ev_b = h.a, h.b, h.ev_a, h.ev_b
        alloc_b = ev_b.get("allocate")
        b_calls = [
            c
            for c in calls
            if alloc_b is not None
            and alloc_b - 0.5 <= c[0] <= b.start
            and (c[1] == b.job or (c[1] == "-" and c[2] == "sbatch" and "runner.sbatch" in c[3]))
        ]
        first_call = b_calls[0][0] if b_calls else None
        sbatch = next((c[0] for c in b_calls if c[2] == "sbatch"), None)
        out.append(
            {
                "from_job": a.job,
                "to_job": b.job,
                "handoff_s": span(h.exit, b.start),
                "app_exit_to_runner_record_end": span(h.exit, h.rec_a.get("end")),
                "app_exit_to_job_complete (after_app, python exit, in slurmctld)": span(h.exit, ev_a.get("complete")),
                "next_runner_queued_before_app_exit": span(ev_b.get("submit"), h.exit),
                "job_complete_to_next_allocate (dependency release + scheduler)": span(ev_a.get("complete"), alloc_b),
                "allocated_by": {1.0: "backfill", 0.0: "main"}.get(ev_b.get("allocated_by_backfill", -1), "-"),
                "allocate_to_first_slurm_call (launch + chain runner python start)": span(alloc_b, first_call),
                "first_call_to_successor_sbatch (judge predecessor)": span(first_call, sbatch),
                "successor_sbatch_to_app_start (end-time query, record, bash -c, app start)": span(sbatch, b.start),
                "slurm_calls_of_next_runner_before_app": [f"{c[2]}@{c[0] - (alloc_b or 0):+.2f}" for c in b_calls],
            }
        )
    return out


def chain_start(ws: Workspace, used: list[Run], calls: list[tuple[float, str, str, str]]) -> dict[str, Any]:
    """submit -> first app start, split at the first runner's milestones.

    ``chain submit`` submits the submitter and the first runner itself, so
    runner 1 does not wait for the submitter job to start."""
    if not used:
        return {}
    first = used[0]
    ev = ctld_events([ws.submitter_job, first.job])
    runner_q = next((c[0] for c in calls if c[1] == first.job and c[2] == "squeue"), None)
    return {
        "chain_submit_command (python start-up, render, 2 x sbatch)": span(ws.t_submit, ws.t_submitted),
        "submit_to_runner_sbatch (in slurmctld)": span(ws.t_submit, ev[first.job].get("submit")),
        "runner_sbatch_to_allocate (scheduler)": span(ev[first.job].get("submit"), ev[first.job].get("allocate")),
        "runner_allocate_to_runner_squeue (launch + python start)": span(ev[first.job].get("allocate"), runner_q),
        "runner_squeue_to_app_start": span(runner_q, first.start),
        "submit_to_first_app_start": span(ws.t_submit, first.start),
        "submit_to_submitter_allocate (in parallel)": span(ws.t_submit, ev[ws.submitter_job].get("allocate"))
        if ws.submitter_job
        else None,
    }


# --------------------------------------------------------------------------- model for long runners
def chain_calls_model(hours: float = 24.0) -> dict[str, Any]:
    """Slurm calls the chain submitter + runner make for one runner of ``hours``,
    from chain's own PollPolicy (what the wrappers would count on a long runner)."""
    sys.path.insert(0, str(ROOT))
    from chain.core.poll import PollPolicy

    pol = PollPolicy()
    end = hours * 3600
    t, queries = 0.0, 1  # one query at adoption/submit
    while True:
        t = pol.next_slurm_query(t, end)
        if t >= end:
            break
        queries += 1
    # the runner's own end_time squeue, squeue+sacct once it ended, the next sbatch
    per_runner = queries + 1 + 2 + 1
    return {
        "runner_hours": hours,
        "squeue_while_running": queries,
        "per_runner": per_runner,
        "per_runner_hour": per_runner / hours,
        "while_running_per_runner_hour": (queries + 1) / hours,
    }


# --------------------------------------------------------------------------- chain status on 10 000 runners
# --------------------------------------------------------------------------- report
def fmt(x: Any, nd: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def every_run(results: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Round 1 (``systems``) and the later rounds (``repeats``) of a system."""
    first = results["systems"].get(name)
    return ([first] if first else []) + list(results.get("repeats", {}).get(name, []))


def combined(results: dict[str, Any], name: str) -> dict[str, Any]:
    """Medians over a system's runs (ok runs only; all runs if none is ok)."""
    runs = [r for r in every_run(results, name) if r["ok"]] or every_run(results, name)

    def md(get: Any) -> float | None:
        return med([v for v in (get(r) for r in runs) if v is not None])

    return {
        "runs": len(runs),
        "handoff_median_s": md(lambda r: r["handoff_median_s"]),
        "handoff_max_s": max((r["handoff_max_s"] for r in runs if r["handoff_max_s"] is not None), default=None),
        "span_over_compute": md(lambda r: r["span_over_compute"]),
        "submit_to_done_over_compute": md(lambda r: r["submit_to_done_over_compute"]),
        "cost_ratio": md(lambda r: (r.get("cost") or {}).get("ratio")),
    }


def render(results: dict[str, Any]) -> str:
    sysres = results["systems"]
    model = results["chain_calls_model_24h"]
    L = [
        f"# Handoff benchmark {results['date']}",
        "",
        (
            f"Same app everywhere: examples/python/app.py, {ITER_SECONDS:g} s/iteration, checkpoint every "
            f"{CHECKPOINT_EVERY}, MAX_ITER={MAX_ITER} (pure compute {PURE_COMPUTE:.0f} s), runner limit "
            f"{RUNNER_LIMIT} s - margin {RUNNER_MARGIN} s = {RUNNER_LIMIT - RUNNER_MARGIN} s window. "
            f"Cluster: {results['cluster']}."
        ),
        "",
        (
            "| system | runners | handoff median (s) | handoff max (s) | handoffs (s) | first start→last exit (s) "
            "| ÷ compute | submit→done (s) | ÷ compute | submit→first start / last exit→done (s) "
            "| Slurm calls total | calls while an app runs | per runner-hour: while running / all calls "
            "(measured, 20 s runners) | per runner-hour, 24 h runner (model) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    m, g = results.get("machine", {}), results.get("git_at_start", {})
    if m:
        L[3:3] = [
            (
                f"Machine: {m['nproc']} CPUs (nproc), Debian {m['debian_version']}, {m['slurm']}. "
                f"Commit: {g.get('commit')} at the start, {results.get('git_at_end', {}).get('commit')} at the end "
                f"(`git status --short chain/` at the start: {', '.join(g.get('git_status_short_chain') or []) or 'clean'}). "
                "The cluster is shared with other developers' test runs: timings carry that load "
                "(load average at the start and end of every run below)."
            ),
            "",
        ]
    models = {
        "a": "360 (squeue every 10 s) + 2 per runner",
        "b": "0 (N sbatch up front)",
        "c": f"{model['per_runner_hour']:.2f} ({model['per_runner']} per 24 h runner)",
    }
    relay = sysres.get("c_relay")
    if relay and relay.get("relay_calls_per_runner") is not None:
        models["c_relay"] = (
            f"{relay['relay_calls_per_runner'] / 24:.2f} (measured {relay['relay_calls_per_runner']:.1f} "
            "calls per runner, none while the app runs)"
        )
    for name in ("a", "b", "c", "c_relay", "c_long", "c_restart"):
        r = sysres.get(name)
        if not r:
            continue
        flag = "" if r["ok"] else " ⚠"
        L.append(
            f"| ({name}) {r['label']}{flag} | {r['runners']} | {fmt(r['handoff_median_s'])} | "
            f"{fmt(r['handoff_max_s'])} | {', '.join(f'{h:.1f}' for h in r['handoffs_s'])} | "
            f"{fmt(r['first_start_to_last_exit_s'])} | {fmt(r['span_over_compute'], 2)} | "
            f"{fmt(r['submit_to_done_s'])} | {fmt(r['submit_to_done_over_compute'], 2)} | "
            f"{fmt(r['submit_to_first_app_start_s'])} / {fmt(r['last_app_exit_to_done_s'])} | "
            f"{r['slurm_calls_total']} | {r['slurm_calls_while_runner_runs']} | "
            f"{fmt(r['calls_per_runner_hour_measured'], 0)} / {fmt(r['calls_per_runner_hour_total'], 0)} | "
            f"{models.get(name, models[name[0]])} |"
        )
    L += [
        "",
        "## Allocation cost and load per run",
        "",
        (
            "| system | commit | load avg (1 min) start → end | non-runner jobs' CPU-s (sacct) | runner jobs' CPU-s "
            "(ran the app) | non-runner / runner | CPU-s by kind | fault suite overlapped |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("a", "b", "c", "c_relay", "c_long", "c_restart"):
        r = sysres.get(name)
        if not r or not r.get("cost"):
            continue
        c = r["cost"]
        la, lb = r.get("loadavg_start"), r.get("loadavg_end")
        L.append(
            f"| ({name}) | {r.get('git', '-')} | {la[0] if la else '-'} → {lb[0] if lb else '-'} | "
            f"{c['non_runner_cpu_s']} | {c['runner_cpu_s']} | {fmt(c['ratio'], 3)} | "
            f"{', '.join(f'{k}: {v}' for k, v in c['cpu_s_by_kind'].items())} | "
            f"{'yes (discard)' if r.get('overlapped_fault_suite') else 'no'} |"
        )
    if any(results.get("repeats", {}).values()):
        L += [
            "",
            "## Every round",
            "",
            (
                "| system | round | handoff median (s) | handoffs (s) | first start→last exit ÷ compute | submit→done "
                "÷ compute | non-runner / runner CPU-s | load avg 1 min start → end | started | commit |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name in ("a", "b", "c", "c_relay", "c_long", "c_restart"):
            runs = every_run(results, name)
            if not runs:
                continue
            for r in runs:
                la, lb = r.get("loadavg_start"), r.get("loadavg_end")
                L.append(
                    f"| ({name}){'' if r['ok'] else ' ⚠'} | {r.get('round', 1)} | {fmt(r['handoff_median_s'], 2)} | "
                    f"{', '.join(f'{h:.1f}' for h in r['handoffs_s'])} | {fmt(r['span_over_compute'], 2)} | "
                    f"{fmt(r['submit_to_done_over_compute'], 2)} | {fmt((r.get('cost') or {}).get('ratio'), 3)} | "
                    f"{la[0] if la else '-'} → {lb[0] if lb else '-'} | {r.get('started_at', '-')} | "
                    f"{r.get('git', '-')} |"
                )
            m = combined(results, name)
            L.append(
                f"| ({name}) **median of {m['runs']}** | | **{fmt(m['handoff_median_s'], 2)}** "
                f"| max {fmt(m['handoff_max_s'], 1)} | **{fmt(m['span_over_compute'], 2)}** | "
                f"**{fmt(m['submit_to_done_over_compute'], 2)}** | **{fmt(m['cost_ratio'], 3)}** | | | |"
            )
    if results.get("discarded"):
        L += ["", "## Discarded runs (a fault suite stopped slurmctld during them)", ""]
        L += [
            f"- ({d['system']}) round {d.get('round')}, started {d.get('started_at')}, fault suite seen "
            f"{d.get('fault_suite_seen')}, handoffs {d.get('handoffs_s')}, in {d.get('workdir')}"
            for d in results["discarded"]
        ]
    st = results.get("status")
    L += ["", "## Targets (chain)", "", "| target | chain | verdict |", "|---|---|---|"]
    b = sysres.get("b")
    for name in CHAIN_SYSTEMS:
        c = sysres.get(name)
        if not c:
            continue
        hm = c["handoff_median_s"]
        L.append(
            f"| ({name}) handoff median ≤ 2 s | {fmt(hm, 2)} s | {'PASS' if hm is not None and hm <= 2 else 'FAIL'} |"
        )
        if b and b.get("handoff_median_s"):
            ratio = hm / b["handoff_median_s"] if hm is not None else None
            L.append(
                f"| ({name}) handoff median ≤ 1.2 × dependency chain ({fmt(b['handoff_median_s'], 2)} s) | "
                f"{fmt(ratio, 2)} × | {'PASS' if ratio is not None and ratio <= 1.2 else 'FAIL'} |"
            )
        for key, what in (
            ("span_over_compute", "first app start → last app exit"),
            ("submit_to_done_over_compute", "submit → done"),
        ):
            v = c[key]
            L.append(
                f"| ({name}) whole chain ≤ 1.15 × pure compute ({what}) | {fmt(v, 2)} × | "
                f"{'PASS' if v is not None and v <= 1.15 else 'FAIL'} |"
            )
        L.append(
            f"| ({name}) ≤ 12 Slurm calls per runner-hour while a runner runs, measured on 20 s runners | "
            f"{fmt(c['calls_per_runner_hour_measured'], 0)} ({c['slurm_calls_while_runner_runs']} calls in "
            f"{c['runner_hours'] * 3600:.0f} s) | {'PASS' if (c['calls_per_runner_hour_measured'] or 0) <= 12 else 'not comparable: fixed calls per runner or restart over 20 s runners (see the 24 h model row)'} |"
        )
    if sysres.get("c_relay"):
        c, r = combined(results, "c"), combined(results, "c_relay")
        over = f" (median of {r['runs']} runs)" if r["runs"] > 1 else ""
        if c["handoff_median_s"] is not None and r["handoff_median_s"] is not None:
            v = r["handoff_median_s"] <= c["handoff_median_s"]
            L.append(
                f"| (c_relay) handoff median ≤ submitter mode's (c, {fmt(c['handoff_median_s'], 2)} s){over} | "
                f"{fmt(r['handoff_median_s'], 2)} s | {'PASS' if v else 'FAIL'} |"
            )
        for key, what in (
            ("span_over_compute", "first app start → last app exit"),
            ("submit_to_done_over_compute", "submit → done"),
        ):
            v = r[key]
            L.append(
                f"| (c_relay) whole chain ≤ 1.10 × pure compute ({what}){over} | {fmt(v, 2)} × | "
                f"{'PASS' if v is not None and v <= 1.10 else 'FAIL'} |"
            )
        ratio = r["cost_ratio"]
        L.append(
            f"| (c_relay) non-runner / runner allocated CPU-s ≤ 0.02 (sacct){over} | {fmt(ratio, 3)} | "
            f"{'PASS' if ratio is not None and ratio <= 0.02 else 'FAIL'} |"
        )
    L.append(
        f"| ≤ 12 Slurm calls per runner-hour, 24 h runner (chain's PollPolicy) | "
        f"{model['while_running_per_runner_hour']:.2f} while running, {model['per_runner_hour']:.2f} incl. handoff | "
        f"{'PASS' if model['per_runner_hour'] <= 12 else 'FAIL'} |"
    )
    if st and "commands" in st:
        L += status_target_rows(st)
        L += status_section(st)
    for name in ("c", "c_relay", "c_long", "c_restart"):
        c = sysres.get(name)
        if c and c.get("handoff_breakdown"):
            L += ["", f"## Where chain's handoff time goes ({name})", ""]
            keys = [
                k
                for k in c["handoff_breakdown"][0]
                if k
                not in (
                    "from_job",
                    "to_job",
                    "slurm_calls_between_record_and_sbatch",
                    "slurm_calls_of_next_runner_before_app",
                )
            ]
            L.append("| " + " | ".join(["handoff"] + keys) + " |")
            L.append("|" + "---|" * (len(keys) + 1))
            for h in c["handoff_breakdown"]:
                L.append("| " + " | ".join([f"{h['from_job']}→{h['to_job']}"] + [fmt(h[k], 2) for k in keys]) + " |")
            for h in c["handoff_breakdown"]:
                if "slurm_calls_of_next_runner_before_app" in h:
                    L.append(
                        f"- {h['from_job']}→{h['to_job']} Slurm calls of the next runner before its app, "
                        "from its allocation: " + ", ".join(h["slurm_calls_of_next_runner_before_app"])
                    )
                else:
                    L.append(
                        f"- {h['from_job']}→{h['to_job']} Slurm calls after app exit, before sbatch: "
                        + ", ".join(h["slurm_calls_between_record_and_sbatch"])
                    )
    for name in ("c", "c_relay", "c_long", "c_restart"):
        c = sysres.get(name)
        if c and c.get("start_breakdown"):
            L += ["", f"## chain: submit → first app start ({name})", "", "| step | s |", "|---|---|"]
            L += [f"| {k} | {fmt(v, 2)} |" for k, v in c["start_breakdown"].items()]
    if results.get("remarks"):  # added to the JSON by hand after the run, e.g. what an outside event did
        L += ["", "## Remarks (added after the run)", ""] + [f"- {x}" for x in results["remarks"]]
    L += ["", "## Notes", ""]
    for name, r in sysres.items():
        for n in r["notes"]:
            L.append(f"- ({name}) {n}")
        L.append(
            f"- ({name}) Slurm calls by command {r['slurm_calls_by_command']}, by caller {r['slurm_calls_by_caller']}"
        )
    return "\n".join(L) + "\n"


def remeasure(path: Path, out: Path) -> int:
    results = json.loads(path.read_text())

    def again(name: str, old: dict[str, Any]) -> dict[str, Any]:
        w = old["workspace"]
        ws = Workspace(
            name,
            Path(old["workdir"]),
            {},
            Path(old["workdir"]) / "slurm_calls.log",
            t_submit=w["t_submit"],
            t_submitted=w["t_submitted"],
            t_done=w["t_done"],
            done_how=w["done_how"],
            jobs=w["jobs"],
            notes=w["notes"],
            ok=w["ok"],
            submitter_job=w.get("submitter_job", ""),
            chain_id=w.get("chain_id", ""),
            submitter_jobs=w.get("submitter_jobs", []),
        )
        keep: dict[str, Any] = {
            k: old[k]
            for k in (
                "git",
                "git_status_short_chain",
                "loadavg_start",
                "loadavg_end",
                "started_at",
                "overlapped_fault_suite",
                "fault_suite_seen",
                "waited_for_fault_suite_s",
                "round",
            )
            if k in old
        }
        return {**measure(ws), **keep}

    for name, old in list(results["systems"].items()):
        results["systems"][name] = again(name, old)
    for name, runs in results.get("repeats", {}).items():
        results["repeats"][name] = [again(name, old) for old in runs]
    write_results(out, path.stem, results, render(results))
    return 0 if all(r["ok"] for r in results["systems"].values()) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--systems",
        default=",".join(DEFAULT_ORDER),
        help=f"comma-separated, run in this order; of {', '.join(SYSTEMS)} (default %(default)s)",
    )
    ap.add_argument("--no-status", action="store_true", help="skip the chain status / start-up figures")
    ap.add_argument("--work", default=str(BENCH / ".work"), help="scratch directory (default %(default)s)")
    ap.add_argument("--out", default=str(BENCH / "results"), help="results directory (default %(default)s)")
    ap.add_argument("--stem", help="results file name without .json/.md (default: the date)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the --systems this many times, in rounds; the "
        "table shows round 1, a section every round and the medians over them (default %(default)s)",
    )
    ap.add_argument(
        "--attempts",
        type=int,
        default=3,
        help="runs of a system at most, while a fault suite "
        "(/tmp/FAULT_SUITE_RUNNING) overlaps them (default %(default)s)",
    )
    ap.add_argument("--merge", metavar="JSON", help="start from an earlier results file, re-running only --systems")
    ap.add_argument(
        "--remeasure",
        metavar="JSON",
        help="recompute the measurements and table of an earlier "
        "results file from its work directories (no Slurm jobs)",
    )
    args = ap.parse_args()

    if args.remeasure:
        return remeasure(Path(args.remeasure), Path(args.out))
    if shutil.which("sbatch") is None or not os.environ.get("SLURM_CONF"):
        log('hint: eval "$(bash scripts/dev-cluster env)" first (SLURM_CONF unset)')
    if real("sinfo", "-h", "-o", "%P").returncode != 0:
        log("the Slurm controller does not answer: bash scripts/dev-cluster up")
        return 2
    stamp = time.strftime("%Y-%m-%dT%H%M%S")
    base = Path(args.work) / stamp
    base.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"systems": {}}
    if args.merge:
        results = json.loads(Path(args.merge).read_text())
    results.update(
        {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine(),
            "git_at_start": git_commit(),
            "loadavg_at_start": loadavg(),
            "cluster": f"{real('sinfo', '-V').stdout.strip()}, single node, MinJobAge {min_job_age()}",
            "python": PY,
            "settings": {
                "max_iter": MAX_ITER,
                "checkpoint_every": CHECKPOINT_EVERY,
                "iter_seconds": ITER_SECONDS,
                "runner_limit_s": RUNNER_LIMIT,
                "runner_margin_s": RUNNER_MARGIN,
            },
            "chain_calls_model_24h": chain_calls_model(24.0),
        }
    )
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    for name in names:
        if name not in SYSTEMS:
            ap.error(f"unknown system {name!r}")
    repeats = results.setdefault("repeats", {})
    for name in names:
        repeats.pop(name, None)
    for rnd in range(args.rounds):
        rbase = base / f"round{rnd + 1}" if args.rounds > 1 else base
        for name in names:
            for attempt in range(args.attempts):
                r = run_system(rbase if attempt == 0 else rbase / f"retry{attempt}", name)
                r["round"] = rnd + 1
                if not r.get("overlapped_fault_suite") or attempt == args.attempts - 1:
                    break
                results.setdefault("discarded", []).append(
                    {
                        k: r.get(k)
                        for k in (
                            "system",
                            "round",
                            "workdir",
                            "started_at",
                            "fault_suite_seen",
                            "handoffs_s",
                            "submit_to_done_s",
                            "loadavg_start",
                            "loadavg_end",
                            "git",
                        )
                    }
                )
                log(f"({name}) overlapped a fault suite: discarded, running it again")
            if rnd == 0:
                results["systems"][name] = r
            else:
                repeats.setdefault(name, []).append(r)
    if not args.no_status:
        log("chain status on 10 000 runners ...")
        results["status"] = status_bench(base)
    results["git_at_end"], results["loadavg_at_end"] = git_commit(), loadavg()
    write_results(Path(args.out), args.stem or time.strftime("%Y-%m-%d"), results, render(results))
    every = list(results["systems"].values()) + [r for rs in repeats.values() for r in rs]
    return 0 if all(r["ok"] for r in every) else 1


def run_system(base: Path, name: str) -> dict[str, Any]:
    """One run of one system, measured."""
    ws = make_workspace(base, name)
    others = real("squeue", "-h", "-o", "%i").stdout.split()
    ws.notes.append(f"{len(others)} other jobs in the queue at the start")
    log(f"running ({name}) {SYSTEMS[name]} in {ws.dir}")
    around: dict[str, Any] = {}
    if name in CHAIN_SYSTEMS:
        timed(run_chain, around, ws, CHAIN_EXTRA[name], timeout=600)
        left = wait_chain_jobs(ws, time.time())
        if left:
            real("scancel", *left)
            ws.notes.append(f"jobs of the chain still queued after it was done, cancelled by the bench: {left}")
    elif name == "b":
        timed(run_dependency_chain, around, ws, timeout=600)
    elif name == "a":
        timed(run_seed, around, ws, timeout=3000)
    r = measure(ws)
    r.update(around)
    if around.get("overlapped_fault_suite"):
        r["ok"] = False
        r["notes"].append("a fault suite ran during this run (slurmctld stopped): discard it")
    if r["slurm_calls_total"] == 0:
        r["ok"] = False
        r["notes"].append("no Slurm client call was counted: the wrappers were not on the jobs' PATH")
    log(
        f"({name}) handoffs {r['handoffs_s']} span {fmt(r['first_start_to_last_exit_s'])} s "
        f"submit→done {fmt(r['submit_to_done_s'])} s calls {r['slurm_calls_total']} "
        f"cost {fmt((r.get('cost') or {}).get('ratio'), 3)} load {around.get('loadavg_start')}→"
        f"{around.get('loadavg_end')}"
    )
    return r


if __name__ == "__main__":
    sys.exit(main())
