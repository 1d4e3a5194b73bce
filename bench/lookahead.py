#!/usr/bin/env python3
"""Lookahead benchmark: what `chain submit --lookahead` saves on a busy
cluster, and relay mode (`--mode relay`, whose runners always queue
their successor) beside both.

Runs the bench's standard chain (examples/python/app.py, 60 iterations of 1 s,
checkpoint every 5, runner 0:30 with a 10 s margin; bench/handoff.py's
``run_chain``) in submitter mode with and without ``--lookahead`` and in
relay mode, in rounds (off, on, relay; ``--modes``), while a filler driver
keeps the cluster busy: every CPU of the single node
runs a 1-CPU ``sleep D`` job named ``bench-filler`` (D uniform in
[--dmin, --dmax] s, seeded RNG) and P more fillers are always waiting
(topped up every second; one load level per P in ``--pending``, default 6
then 3).  With priority/basic (FIFO by submit time) a
runner submitted when its predecessor ends queues behind that whole backlog;
a runner pre-queued by lookahead when its predecessor *started* has had its
predecessor's compute time to move up the queue.  Then one unloaded pair (no
fillers) shows what lookahead costs on an idle cluster.

Per run: runners, handoffs (app exit -> next app start, from the app's log),
queue wait after the predecessor's job ended (slurmctld.log), first start ->
last exit, submit -> done, Slurm calls (counted by handoff.py's wrappers; the
fillers and the benchmark's own calls are not counted), what happened to
every runner job of the chain (ran the app / exited without it / cancelled /
left over), the allocated CPU-seconds of the jobs that did not run the app
over those of the runners that did (sacct), the load average at the start and
end of the run and the git commit measured.  Prints a markdown table, writes bench/results/lookahead-<date>.md
and .json; scratch in bench/.work/<timestamp>-lookahead/.  Not part of the
test suite.  Serialise with other users of the dev cluster:

    eval "$(bash scripts/dev-cluster env)"
    flock /tmp/chain-cluster.lock python3 bench/lookahead.py            # ~40 min (~25 with --modes off,on)
    flock /tmp/chain-cluster.lock python3 bench/lookahead.py --quick    # one round at P=6, ~10 min
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import handoff
from handoff import (
    BENCH,
    PURE_COMPUTE,
    Workspace,
    chain_job_ids,
    ctld_events,
    fmt,
    git_commit,
    loadavg,
    log,
    machine,
    make_workspace,
    measure,
    med,
    real,
    run_chain,
    timed,
    write_results,
)

FILLER = "bench-filler"


def node_cpus() -> int:
    """The dev cluster's job slots (scripts/dev-cluster: CHAIN_DEV_CLUSTER_CPUS, 16 by default)."""
    return int(real("sinfo", "-h", "-o", "%c", check=True).stdout.split()[0])


# The submitter must outlive a loaded chain (~4-5 min): a restart would queue
# the successor submitter behind the backlog too, and measure that instead.
CHAIN_ARGS = ["--submitter-time", "30:00"]
# a workspace name starting with "c" gets handoff.measure's chain breakdowns
# ("c_relay": handoff.measure's relay breakdown)
LABELS = {
    "c_off": "chain, no lookahead (--submitter-time 30:00)",
    "c_on": "chain --lookahead (--submitter-time 30:00)",
    "c_relay": "chain --mode relay (no submitter job)",
}
MODES = {"off": ("c_off", []), "on": ("c_on", ["--lookahead"]), "relay": ("c_relay", ["--mode", "relay"])}


# --------------------------------------------------------------------------- the load
class Load(threading.Thread):
    """Keeps every CPU busy with filler jobs and ``pending`` more waiting."""

    def __init__(self, pending: int, dmin: float, dmax: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.pending, self.dmin, self.dmax = pending, dmin, dmax
        self.rng = random.Random(seed)
        self.ids: list[str] = []
        self.submitted: list[float] = []  # submit times
        self.samples: list[tuple[float, int, int]] = []  # (time, running fillers, pending fillers)
        self.errors: list[str] = []
        self.halt = threading.Event()

    def submit(self) -> None:
        d = self.rng.uniform(self.dmin, self.dmax)
        p = real(
            "sbatch",
            "--parsable",
            "-J",
            FILLER,
            "-p",
            "debug",
            "-c",
            "1",
            "-t",
            "2",
            "-o",
            "/dev/null",
            "--wrap",
            f"sleep {d:.1f}",
        )
        if p.returncode == 0:
            self.ids.append(p.stdout.strip().split(";")[0])
            self.submitted.append(time.time())
        elif len(self.errors) < 20:
            self.errors.append(p.stderr.strip())

    def counts(self) -> tuple[int, int] | None:
        p = real("squeue", "-h", "-n", FILLER, "-o", "%T")
        if p.returncode != 0:
            return None
        states = p.stdout.split()
        return states.count("RUNNING"), states.count("PENDING")

    def run(self) -> None:
        for _ in range(node_cpus() + self.pending):
            self.submit()
        while not self.halt.wait(1.0):
            c = self.counts()
            if c is None:
                continue
            self.samples.append((time.time(), *c))
            for _ in range(max(0, self.pending - c[1])):
                self.submit()

    def wait_steady(self, timeout: float = 120) -> None:
        """Until the node is full of fillers and the backlog is there."""
        end = time.time() + timeout
        while time.time() < end:
            c = self.counts()
            if c and c[0] >= node_cpus() - 1 and self.pending <= c[1] <= self.pending + 1:
                return
            time.sleep(1)
        log(f"load not steady after {timeout:.0f} s: {self.counts()}")

    def stop(self) -> None:
        self.halt.set()
        if self.is_alive():
            self.join(timeout=10)


def cancel_fillers(ids: list[str]) -> None:
    for i in range(0, len(ids), 200):
        real("scancel", *ids[i : i + 200])
    real("scancel", "-n", FILLER)


def wait_no_fillers(timeout: float = 60) -> None:
    end = time.time() + timeout
    while time.time() < end and real("squeue", "-h", "-n", FILLER, "-o", "%i").stdout.strip():
        time.sleep(1)


# --------------------------------------------------------------------------- one run
def chain_jobs(ws: Workspace) -> list[dict[str, str]]:
    """Every Slurm job of this chain (submitters, runners, pre-queued runners),
    by the job ids in chain.log and the id files, from sacct (by id: a job
    cancelled while held by its dependency was never eligible, and a
    time-window query omits it)."""
    ids = chain_job_ids(ws)
    if not ids:
        return []
    p = real("sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobIDRaw,JobName,State,Start")
    rows = [dict(zip(("job", "name", "state", "start"), line.split("|"))) for line in p.stdout.splitlines()]
    return [r for r in rows if len(r) == 4 and r["job"] in ids]


def run_one(base: Path, idx: int, mode: str, load: str, timeout: float) -> dict[str, Any]:
    name, extra = MODES[mode]
    lookahead = mode == "on"
    ws = make_workspace(base / f"{idx:02d}-{re.sub(r'[^A-Za-z0-9]+', '', load)}", name)
    others = [j for j in real("squeue", "-h", "-o", "%j").stdout.split() if j != FILLER]
    log(f"run {idx}: {LABELS[name]}, {load} ({len(others)} other jobs queued) in {ws.dir}")
    around: dict[str, Any] = {}
    try:
        timed(run_chain, around, ws, CHAIN_ARGS + extra, timeout=timeout)
    finally:
        time.sleep(3)  # let a cancel of the last pre-queued runner land
        jobs = chain_jobs(ws)
        left = [j["job"] for j in jobs if j["state"] in ("PENDING", "RUNNING", "COMPLETING")]
        if left:
            real("scancel", *left)
    r = measure(ws, LABELS[ws.name])
    r.update(around)
    if around.get("overlapped_fault_suite"):
        r["ok"] = False
        r["notes"].append("a fault suite ran during this run (slurmctld stopped): discard it")
    r.update(
        lookahead=lookahead,
        mode=mode,
        load=load,
        index=idx,
        other_jobs_at_start=len(others),
        leftover_jobs_cancelled_by_bench=left,
        chain_jobs=jobs,
    )
    # per handoff: how long the next runner queued once its predecessor's job had ended
    used = [h["job"] for h in r["runs"]]
    ev = ctld_events(used)
    waits, pre = [], []
    for a, b in pairwise(used):
        ca, ab, sb = ev[a].get("complete"), ev[b].get("allocate"), ev[b].get("submit")
        waits.append(round(ab - ca, 3) if ca and ab else None)
        pre.append(round(ca - sb, 3) if ca and sb else None)  # > 0: queued before the predecessor ended
    r["queue_wait_after_predecessor_s"] = waits
    r["queued_before_predecessor_end_s"] = pre
    r["queue_wait_median_s"] = med([w for w in waits if w is not None])
    all_runs = handoff.parse_iterlog(ws.dir / "iterations.log")
    ran_app = {x.job for x in all_runs}
    runner_jobs = [j for j in jobs if j["job"] != ws.submitter_job and ".r" in j["name"]]
    r["app_runs_total"] = len(all_runs)
    r["runner_jobs"] = {
        "submitted": len(runner_jobs),
        "ran_app": sum(j["job"] in ran_app for j in runner_jobs),
        "started_without_app": [
            j["job"] for j in runner_jobs if j["job"] not in ran_app and j["start"] not in ("", "Unknown", "None")
        ],
        "cancelled": [j["job"] for j in runner_jobs if j["state"].startswith("CANCELLED")],
        "states": {j["job"]: j["state"] for j in runner_jobs},
    }
    if len(all_runs) > len(r["runs"]):
        r["ok"] = False
        r["notes"].append(f"{len(all_runs) - len(r['runs'])} app run(s) after the one that finished the work")
    if left:
        r["notes"].append(f"jobs still queued after the chain was done, cancelled by the bench: {left}")
    log(
        f"run {idx}: handoffs {r['handoffs_s']} queue waits {waits} span {fmt(r['first_start_to_last_exit_s'])} s "
        f"submit→done {fmt(r['submit_to_done_s'])} s calls {r['slurm_calls_total']} jobs {r['runner_jobs']['states']} "
        f"cost {fmt(r['cost']['ratio'], 3)} load {around.get('loadavg_start')}→{around.get('loadavg_end')}"
    )
    return r


def run_attempts(
    res: dict[str, Any], attempts: int, base: Path, idx: int, mode: str, load: str, timeout: float
) -> dict[str, Any]:
    """run_one, again (up to ``attempts`` runs) while a fault suite overlaps it;
    the discarded runs are listed in the results."""
    for attempt in range(attempts):
        r = run_one(base if attempt == 0 else base / f"retry{attempt}", idx, mode, load, timeout)
        if not r.get("overlapped_fault_suite") or attempt == attempts - 1:
            return r
        res.setdefault("discarded", []).append(
            {
                k: r.get(k)
                for k in (
                    "index",
                    "mode",
                    "load",
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
        log(f"run {idx}: overlapped a fault suite: discarded, running it again")
    return r


# --------------------------------------------------------------------------- report
SAVED = ("handoff_median_s", "first_start_to_last_exit_s", "submit_to_done_s")
# (a, b): the saving a - b, per load level and round, then of the medians
COMPARISONS = (("off", "on"), ("off", "relay"), ("on", "relay"))


def mode_of(r: dict[str, Any]) -> str:
    return str(r.get("mode") or ("on" if r["lookahead"] else "off"))  # results before relay had no "mode"


def savings(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per load level and round (the i-th run of each mode): a - b for each
    comparison of COMPARISONS, then the same of the medians."""
    out = []
    for load in dict.fromkeys(r["load"] for r in runs):
        by_mode = {m: [r for r in runs if r["load"] == load and mode_of(r) == m] for m in MODES}
        for a_mode, b_mode in COMPARISONS:
            xs, ys = by_mode[a_mode], by_mode[b_mode]
            what = f"{a_mode} − {b_mode}"
            for i, (a, b) in enumerate(zip(xs, ys), 1):
                out.append({"load": load, "compare": what, "pair": i, **{k: diff(a, b, k) for k in SAVED}})
            if xs and ys:
                out.append({"load": load, "compare": what, "pair": "median", **{k: diff_med(xs, ys, k) for k in SAVED}})
    return out


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per load level and mode."""
    out = []
    for load in dict.fromkeys(r["load"] for r in runs):
        for m in MODES:
            rs = [r for r in runs if r["load"] == load and mode_of(r) == m and r["ok"]]
            if not rs:
                continue

            def md(key: str, rs: list[dict[str, Any]] = rs) -> float | None:
                return med([r[key] for r in rs if r.get(key) is not None])

            out.append(
                {
                    "load": load,
                    "mode": m,
                    "runs": len(rs),
                    "handoff_median_s": md("handoff_median_s"),
                    "span_over_compute": md("span_over_compute"),
                    "submit_to_done_over_compute": md("submit_to_done_over_compute"),
                    "cost_ratio": med(
                        [r["cost"]["ratio"] for r in rs if (r.get("cost") or {}).get("ratio") is not None]
                    ),
                }
            )
    return out


def diff(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    return a[key] - b[key] if a[key] is not None and b[key] is not None else None


def diff_med(offs: list[dict[str, Any]], ons: list[dict[str, Any]], key: str) -> float | None:
    x, y = med([r[key] for r in offs if r[key] is not None]), med([r[key] for r in ons if r[key] is not None])
    return x - y if x is not None and y is not None else None


def render(res: dict[str, Any]) -> str:
    s = res["settings"]
    m, g = res.get("machine", {}), res.get("git_at_start", {})
    prov = (
        [
            (
                f"Machine: {m['nproc']} CPUs (nproc), Debian {m['debian_version']}, {m['slurm']}. Commit: "
                f"{g.get('commit')} at the start, {res.get('git_at_end', {}).get('commit')} at the end "
                f"(`git status --short chain/` at the start: {', '.join(g.get('git_status_short_chain') or []) or 'clean'}). "
                "The 2-CPU machine is shared with other developers' test runs: timings carry that load (load "
                "average at the start and end of every run below)."
            ),
            "",
        ]
        if m
        else []
    )
    L = [
        f"# Lookahead benchmark {res['date']}",
        "",
        *prov,
        (
            f"Chain as in bench/handoff.py (c): 60 × 1 s iterations, checkpoint every 5, runner 0:30 − 10 s margin, "
            f"plus `{' '.join(CHAIN_ARGS)}`; modes in rounds of {', '.join(s.get('modes', ['off', 'on']))} "
            "(off: submitter mode; on: submitter mode with `--lookahead`; relay: `--mode relay`, which has no "
            "submitter job and whose runners always queue their successor). Load: every CPU of the "
            f"{s.get('cpus', 8)}-CPU node busy with 1-CPU `sleep D` fillers (D uniform {s['dmin']:g}–{s['dmax']:g} s, seed "
            f"{s['seed']}) and P more always pending (P = {', '.join(map(str, s['pending']))}); FIFO (priority/basic). Cluster: {res['cluster']}."
        ),
        "",
        (
            "| run | mode | load | runners | handoff median (s) | max (s) | handoffs (s) | queue wait after "
            "predecessor ended (s) | first start→last exit (s) | ÷ compute | submit→first start (s) | submit→done (s) "
            "| ÷ compute | Slurm calls (sbatch / scancel) | runner jobs: submitted / ran app / started, no app / cancelled "
            "| non-runner / runner CPU-s (sacct) | load avg 1 min start → end | commit |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        j, c = r["runner_jobs"], r["slurm_calls_by_command"]
        waits = ", ".join("-" if w is None else f"{w:.1f}" for w in r["queue_wait_after_predecessor_s"])
        cost = r.get("cost") or {}
        la, lb = r.get("loadavg_start"), r.get("loadavg_end")
        L.append(
            f"| {r['index']}{'' if r['ok'] else ' ⚠'} | {mode_of(r)} | {r['load']} | "
            f"{r['runners']} | {fmt(r['handoff_median_s'])} | {fmt(r['handoff_max_s'])} | "
            f"{', '.join(f'{h:.1f}' for h in r['handoffs_s'])} | {waits} | "
            f"{fmt(r['first_start_to_last_exit_s'])} | {fmt(r['span_over_compute'], 2)} | "
            f"{fmt(r['submit_to_first_app_start_s'])} | {fmt(r['submit_to_done_s'])} | "
            f"{fmt(r['submit_to_done_over_compute'], 2)} | "
            f"{r['slurm_calls_total']} ({c.get('sbatch', 0)} / {c.get('scancel', 0)}) | "
            f"{j['submitted']} / {j['ran_app']} / {len(j['started_without_app'])} / {len(j['cancelled'])} | "
            f"{fmt(cost.get('ratio'), 3)} ({cost.get('non_runner_cpu_s', '-')} / {cost.get('runner_cpu_s', '-')}) | "
            f"{la[0] if la else '-'} → {lb[0] if lb else '-'} | {r.get('git', '-')} |"
        )
    if res.get("summary"):
        L += [
            "",
            "## Medians per load and mode (runs marked ⚠ left out)",
            "",
            (
                "| load | mode | runs | handoff median (s) | first start→last exit ÷ compute | submit→done ÷ compute "
                "| non-runner / runner CPU-s |"
            ),
            "|---|---|---|---|---|---|---|",
        ]
        for x in res["summary"]:
            L.append(
                f"| {x['load']} | {x['mode']} | {x['runs']} | {fmt(x['handoff_median_s'])} | "
                f"{fmt(x['span_over_compute'], 2)} | {fmt(x['submit_to_done_over_compute'], 2)} | "
                f"{fmt(x['cost_ratio'], 3)} |"
            )
    L += [
        "",
        "## Savings (a − b: positive when b is faster)",
        "",
        "| load | a − b | round | handoff median (s) | first start→last exit (s) | submit→done (s) |",
        "|---|---|---|---|---|---|",
    ]
    for sv in res["savings"]:
        L.append(
            f"| {sv['load']} | {sv.get('compare', 'off − on')} | {sv['pair']} | {fmt(sv['handoff_median_s'])} | "
            f"{fmt(sv['first_start_to_last_exit_s'])} | {fmt(sv['submit_to_done_s'])} |"
        )
    L += ["", "## Load", ""]
    for lv, ld in res["load"].items():
        L.append(
            f"- {lv}: {ld['fillers_submitted']} fillers submitted; running/pending fillers sampled every second: "
            f"median {fmt(ld['running_median'])} / {fmt(ld['pending_median'])}, "
            f"min pending {ld['pending_min']}" + (f"; sbatch errors {ld['errors'][:3]}" if ld["errors"] else "")
        )
    if res.get("discarded"):
        L += ["", "## Discarded runs (a fault suite stopped slurmctld during them)", ""]
        L += [
            f"- run {d['index']} ({d['mode']}, {d['load']}), started {d.get('started_at')}, fault suite seen "
            f"{d.get('fault_suite_seen')}, handoffs {d.get('handoffs_s')}, in {d.get('workdir')}"
            for d in res["discarded"]
        ]
    if res.get("remarks"):  # added to the JSON by hand after the run, e.g. what an outside event did
        L += ["", "## Remarks (added after the run)", ""] + [f"- {x}" for x in res["remarks"]]
    L += ["", "## Notes", ""]
    for r in res["runs"]:
        for n in r["notes"]:
            L.append(f"- run {r['index']}: {n}")
        L.append(
            f"- run {r['index']}: runner job states {r['runner_jobs']['states']}; queued before predecessor "
            f"ended (s) {r['queued_before_predecessor_end_s']}; other users' jobs queued at start "
            f"{r['other_jobs_at_start']}"
        )
    return "\n".join(L) + "\n"


def load_summary(load: Load, t0: float, t1: float) -> dict[str, Any]:
    smp = [x for x in load.samples if t0 <= x[0] <= t1]
    return {
        "fillers_submitted": sum(t0 <= t <= t1 for t in load.submitted),
        "running_median": med([float(x[1]) for x in smp]),
        "pending_median": med([float(x[2]) for x in smp]),
        "pending_min": min((x[2] for x in smp), default=None),
        "errors": load.errors,
    }


# --------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--pairs", type=int, default=2, help="loaded rounds of --modes per load level (default %(default)s)"
    )
    ap.add_argument(
        "--modes",
        default="off,on,relay",
        help="the runs of a round, in this order, of "
        f"{', '.join(MODES)} (off/on: submitter mode without/with --lookahead; relay: --mode relay) "
        "(default %(default)s)",
    )
    ap.add_argument(
        "--pending",
        default="6,3",
        help="fillers kept pending: one load level each, comma-separated, run in this order (default %(default)s)",
    )
    ap.add_argument("--dmin", type=float, default=20.0, help="shortest filler, s (default %(default)s)")
    ap.add_argument("--dmax", type=float, default=40.0, help="longest filler, s (default %(default)s)")
    ap.add_argument("--seed", type=int, default=8, help="filler durations RNG seed (default %(default)s)")
    ap.add_argument("--no-idle", action="store_true", help="skip the unloaded round")
    ap.add_argument(
        "--quick", action="store_true", help="trial: one loaded round at the first load level, no unloaded round"
    )
    ap.add_argument("--stem", help="results file name without .json/.md (default lookahead-<date>)")
    ap.add_argument(
        "--attempts",
        type=int,
        default=3,
        help="runs of one mode at most, while a fault suite "
        "(/tmp/FAULT_SUITE_RUNNING) overlaps them (default %(default)s)",
    )
    ap.add_argument("--work", default=str(BENCH / ".work"), help="scratch directory (default %(default)s)")
    ap.add_argument("--out", default=str(BENCH / "results"), help="results directory (default %(default)s)")
    args = ap.parse_args()
    if args.quick:
        args.pairs, args.no_idle, args.pending = 1, True, args.pending.split(",")[0]
    levels = [int(x) for x in args.pending.split(",") if x.strip()]
    modes = [x.strip() for x in args.modes.split(",") if x.strip()]
    if any(x not in MODES for x in modes):
        ap.error(f"--modes: of {', '.join(MODES)}")
    if real("sinfo", "-h", "-o", "%P").returncode != 0:
        log('the Slurm controller does not answer: bash scripts/dev-cluster up; eval "$(bash scripts/dev-cluster env)"')
        return 2
    base = Path(args.work) / (time.strftime("%Y-%m-%dT%H%M%S") + "-lookahead")
    base.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "git_at_start": git_commit(),
        "loadavg_at_start": loadavg(),
        "cluster": f"{real('sinfo', '-V').stdout.strip()}, node vm {node_cpus()} CPUs, partition debug, sched/backfill, "
        "priority/basic",
        "settings": {
            "pending": levels,
            "dmin": args.dmin,
            "dmax": args.dmax,
            "seed": args.seed,
            "cpus": node_cpus(),
            "pairs": args.pairs,
            "modes": modes,
            "chain_args": CHAIN_ARGS,
            "pure_compute_s": PURE_COMPUTE,
        },
        "workdir": str(base),
        "runs": [],
        "load": {},
    }
    idx = 0
    load: Load | None = None
    try:
        if args.pairs and levels:
            load = Load(levels[0], args.dmin, args.dmax, args.seed)
            load.start()
            load.wait_steady()
            time.sleep(args.dmax)  # let the fillers' end times spread out
        for pending in levels if args.pairs else []:
            assert load is not None
            load.pending = pending  # a smaller backlog drains by itself
            load.wait_steady()
            t0 = time.time()
            label = f"loaded P={pending}"
            for _ in range(args.pairs):
                for mode in modes:
                    idx += 1
                    res["runs"].append(run_attempts(res, args.attempts, base, idx, mode, label, timeout=1200))
            res["load"][label] = load_summary(load, t0, time.time())
        if load is not None:
            load.stop()
            cancel_fillers(load.ids)
            wait_no_fillers()
        if not args.no_idle:
            for mode in modes:
                idx += 1
                res["runs"].append(run_attempts(res, args.attempts, base, idx, mode, "idle", timeout=600))
    except KeyboardInterrupt:
        log("interrupted: cleaning up, writing what was measured")
    except Exception as exc:  # noqa: BLE001 - still clean up and write what was measured
        log(f"failed: {exc!r}")
        res["error"] = repr(exc)
    finally:
        if load is not None:
            load.stop()
            cancel_fillers(load.ids)
    res["savings"], res["summary"] = savings(res["runs"]), summary(res["runs"])
    res["git_at_end"], res["loadavg_at_end"] = git_commit(), loadavg()
    write_results(Path(args.out), args.stem or f"lookahead-{time.strftime('%Y-%m-%d')}", res, render(res))
    log(f"scratch in {base}")
    return 0 if res["runs"] and all(r["ok"] for r in res["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
