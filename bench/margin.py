#!/usr/bin/env python3
"""Adaptive runner margin benchmark: allocation efficiency with and without it.

The app is tests/faults/fault_app.py (examples/python/app.py whose every save
sleeps FAULT_SAVE_DELAY s between writing the temporary file and renaming it
into place), copied into each workspace as app.py and started as
``env -u CHAIN_DEADLINE python3 app.py``: a *signal-only* app, which saves when
the runner's stop signal arrives and not earlier (with CHAIN_DEADLINE set, this
app starts its last save early enough by itself and never meets the margin).

Scenarios, each run with chain's default (adaptive margin) and ``--fixed-margin``:
  short    configured margin (the floor) 5 s, too short for the ~9 s stop
           (≤ 1 s to finish the iteration + 8 s save): the fixed runner kills
           the app mid-save every time; the adaptive one learns.
  control  configured margin 30 s ≥ 2 × stop + 5 s: adaptivity should change nothing.
  middle   margin 15 s: enough for the save, below 2 × stop + 5 s (what adaptivity
           costs when the floor already suffices; in the local set, `--scenarios middle` on Slurm).

Per run, from the app's iterations.log, the runner records (.chain/runners/<job>.json)
and the scheduler (slurmctld.log allocation → completion in ms, else sacct; the
local backend's spool records):
  runner wall      Σ over the chain's runner jobs of job start → job end
  useful compute   iterations kept × ITER_SECONDS; a run keeps the counter the next run
                   starts from − the one it started from (the last run: its last `ckpt`);
                   Σ = MAX_ITER for a completed chain
  raw compute      every iteration computed (redone ones too) × ITER_SECONDS
  efficiency       useful compute / runner wall;  raw efficiency: raw compute / runner wall
  redone           iterations computed − iterations kept
  cut saves        `saving` events without their `ckpt` (the rename never happened)
  chain wall       `chain submit` → state.json completed_at
The scenarios of one backend run concurrently (adaptive and fixed see the same load).

    eval "$(bash scripts/dev-cluster env)"
    flock /tmp/chain-cluster.lock python3 bench/margin.py              # real cluster, ~8 min
    flock /tmp/chain-cluster.lock python3 bench/margin.py --scenarios middle   # add one scenario, ~5 min
    python3 bench/margin.py --backend local                            # chain's local backend
    flock /tmp/chain-cluster.lock python3 bench/margin.py --quick      # trial, ~3 min

Writes bench/results/margin-<date>.json and .md (--quick: margin-<date>-quick.*) and prints
the markdown tables; a backend already in that day's file is replaced (with --scenarios, only
those scenarios' runs), the other backends are kept.
Scratch: bench/.work/<timestamp>/margin-<backend>-<scenario>/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from handoff import (
    BENCH,
    PY,
    ROOT,
    Workspace,
    ctld_events,
    fmt,
    log,
    make_workspace,
    parse_iterlog,
    real,
    sacct_times,
    submit_chain,
    wait_job_end,
    write_results,
)

FAULT_APP = ROOT / "tests" / "faults" / "fault_app.py"
APP_CMD = "env -u CHAIN_DEADLINE python3 app.py"
ENDED = ("completed", "failed", "stopped", "cancelled")


@dataclass(frozen=True)
class Setup:
    runner_time: str  # Slurm syntax
    max_iter: int
    checkpoint_every: int
    save_delay: float  # FAULT_SAVE_DELAY, seconds per save
    iter_seconds: float = 1.0
    scenarios: tuple[tuple[str, int], ...] = (("short", 5), ("control", 30))


# 1-minute runners (Slurm's smallest limit), one periodic checkpoint per runner
# (25 iterations + 8 s save = 33 s) and the stop signal in the middle of the next
# 25 iterations for the margins 5-23 s: such a stop costs the rest of an iteration
# + a full save (~9 s). With the control's 30 s it lands in the periodic save (~4 s).
FULL = Setup("1:00", 150, 25, 8.0)
FULL_LOCAL = Setup("1:00", 150, 25, 8.0, scenarios=(("short", 5), ("control", 30), ("middle", 15)))
QUICK = Setup("1:00", 50, 25, 8.0, scenarios=(("short", 5),))


@dataclass
class Chain:
    ws: Workspace
    scenario: str
    margin: int
    adaptive: bool
    state: dict[str, Any]


def submit(base: Path, backend: str, setup: Setup, scenario: str, margin: int, adaptive: bool) -> Chain:
    ws = make_workspace(base, f"margin-{backend}-{scenario}-{'adaptive' if adaptive else 'fixed'}")
    shutil.copy(FAULT_APP, ws.dir / "app.py")
    ws.env.update(ITER_SECONDS=str(setup.iter_seconds), FAULT_SAVE_DELAY=str(setup.save_delay))
    argv = [
        PY,
        "-m",
        "chain",
        "submit",
        "--max-iter",
        str(setup.max_iter),
        "--app-cmd",
        APP_CMD,
        "--checkpoint-every",
        str(setup.checkpoint_every),
        "--runner-time",
        setup.runner_time,
        "--runner-margin",
        str(margin),
        "--backend",
        backend,
        "--retries",
        "2",
    ]
    argv += ["--partition", "debug"] if backend == "slurm" else []
    argv += [] if adaptive else ["--fixed-margin"]
    ws.notes.append("command: " + " ".join(argv[1:]))
    submit_chain(ws, argv)
    return Chain(ws, scenario, margin, adaptive, {})


def read_state(c: Chain) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((c.ws.dir / ".chain" / "state.json").read_text())
        return state
    except (OSError, ValueError):
        return {}


def wait_all(chains: list[Chain], timeout: float) -> None:
    deadline = time.time() + timeout
    pending = [c for c in chains if c.ws.ok]
    while pending and time.time() < deadline:
        time.sleep(1.0)
        for c in list(pending):
            c.state = read_state(c)
            if c.state.get("state") in ENDED:
                pending.remove(c)
                c.ws.t_done = float(c.state.get("completed_at") or time.time())
                log(f"{c.ws.name}: {c.state['state']} ({c.state.get('reason', '')})")
    for c in chains:
        c.state = read_state(c)
        if c.state.get("state") != "completed":
            c.ws.ok = False
            c.ws.notes.append(f"chain ended {c.state.get('state')!r}: {c.state.get('reason', '')}")


def ids(chain_dir: Path, name: str) -> list[str]:
    f = chain_dir / name
    return f.read_text().split() if f.exists() else []


def cleanup(chains: list[Chain], backend: str) -> None:
    """Cancel whatever is still running (a failed or interrupted benchmark)."""
    for c in chains:
        st = read_state(c).get("state")
        if st in ENDED and c.state:
            continue
        log(f"{c.ws.name}: cleaning up (state {st!r})")
        subprocess.run(
            [PY, "-m", "chain", "cancel"], cwd=c.ws.dir, env=c.ws.env, capture_output=True, check=False, timeout=120
        )
        if backend == "slurm":
            jobs = ids(c.ws.dir / ".chain", "worker_ids.txt") + ids(c.ws.dir / ".chain", "submitter_ids.txt")
            for j in jobs:
                real("scancel", j)


# --------------------------------------------------------------------------- measurement
def app_events(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Per app run (job, pid): the last committed checkpoint and the saves cut off."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        f = line.split()
        if len(f) < 5:
            continue
        r = out.setdefault((f[3], f[4]), {"committed": None, "saving": None, "cut": 0, "save_s": 0.0})
        if f[1] == "saving":
            r["saving"] = float(f[0])
        elif f[1] == "ckpt":
            r["committed"] = int(f[2])
            r["save_s"] += float(f[0]) - (r["saving"] or float(f[0]))
            r["saving"] = None
    for r in out.values():
        r["cut"] = 1 if r["saving"] is not None else 0
    return out


def job_wall(backend: str, chain_dir: Path, job: str, ctld: dict[str, dict[str, float]]) -> tuple[float | None, str]:
    """Job start → end: slurmctld.log (ms), else sacct (1 s); the local spool record."""
    if backend == "local":
        try:
            rec = json.loads((chain_dir / "local-jobs" / "jobs" / f"{job}.json").read_text())
            return rec["end"] - rec["start"], rec.get("state", "")
        except (OSError, ValueError, KeyError, TypeError):
            return None, ""
    sa = sacct_times(job)
    ev = ctld.get(job, {})
    if "allocate" in ev and "complete" in ev:
        return ev["complete"] - ev["allocate"], sa.get("state", "")
    if sa.get("start") and sa.get("end"):
        return sa["end"] - sa["start"], sa.get("state", "")
    return None, sa.get("state", "")


def measure(c: Chain, backend: str, setup: Setup) -> dict[str, Any]:
    chain_dir = c.ws.dir / ".chain"
    jobs = ids(chain_dir, "worker_ids.txt")
    if backend == "slurm":
        for j in jobs:  # sacct / slurmctld.log have the end once the job left the queue
            wait_job_end(j, time.time() + 90, every=1.0)
    ctld = ctld_events(jobs) if backend == "slurm" else {}
    runs = parse_iterlog(c.ws.dir / "iterations.log")
    ev = app_events(c.ws.dir / "iterations.log")
    # what a run kept: the counter the next run started from (the last run: its last `ckpt`)
    kept_by_run = {}
    for i, r in enumerate(runs):
        end = runs[i + 1].start_iter if i + 1 < len(runs) else ev[(r.job, r.pid)]["committed"]
        kept_by_run[(r.job, r.pid)] = max(0, (end if end is not None else r.start_iter) - r.start_iter)
    rows = []
    for job in jobs:
        rec: dict[str, Any] = {}
        try:
            rec = json.loads((chain_dir / "runners" / f"{job}.json").read_text())
        except (OSError, ValueError):
            pass
        mine = [r for r in runs if r.job == job]
        computed = sum(r.iters for r in mine)
        kept = sum(kept_by_run[(r.job, r.pid)] for r in mine)
        wall, sstate = job_wall(backend, chain_dir, job, ctld)
        rows.append(
            {
                "job": job,
                "job_state": sstate,
                "wall_s": wall,
                "margin": rec.get("margin"),
                "killed": bool(rec.get("killed")),
                "stop_to_exit_s": rec.get("stop_to_exit"),
                "exit_code": rec.get("exit_code"),
                "detail": rec.get("detail"),
                "iter_before": rec.get("iter_before"),
                "iter_after": rec.get("iter_after"),
                "computed": computed,
                "kept": kept,
                "redone": computed - kept,
                "cut_saves": sum(ev[(r.job, r.pid)]["cut"] for r in mine),
                "save_s": sum(ev[(r.job, r.pid)]["save_s"] for r in mine),
                "app_s": sum((r.exit or 0) - r.start for r in mine if r.exit),
            }
        )
    walls = [r["wall_s"] for r in rows if r["wall_s"] is not None]
    wall = sum(walls) if len(walls) == len(rows) and rows else None
    computed, kept = sum(r["computed"] for r in rows), sum(r["kept"] for r in rows)
    useful, raw = kept * setup.iter_seconds, computed * setup.iter_seconds
    chain_log = (chain_dir / "chain.log").read_text() if (chain_dir / "chain.log").exists() else ""
    return {
        "scenario": c.scenario,
        "configured_margin": c.margin,
        "adaptive": c.adaptive,
        "state": c.state.get("state"),
        "reason": c.state.get("reason"),
        "ok": c.ws.ok,
        "workdir": str(c.ws.dir),
        "notes": c.ws.notes,
        "runners": len(rows),
        "margins": [r["margin"] for r in rows],
        "kills": sum(r["killed"] for r in rows),
        "cut_saves": sum(r["cut_saves"] for r in rows),
        "stop_to_exit_s": [round(r["stop_to_exit_s"], 2) if r["stop_to_exit_s"] is not None else None for r in rows],
        "runner_wall_s": wall,
        "useful_compute_s": useful,
        "raw_compute_s": raw,
        "efficiency": useful / wall if wall else None,
        "raw_efficiency": raw / wall if wall else None,
        "iterations_computed": computed,
        "iterations_kept": kept,
        "iterations_redone": computed - kept,
        "save_seconds": round(sum(r["save_s"] for r in rows), 1),
        "chain_wall_s": (c.ws.t_done - c.ws.t_submit) if c.ws.t_done and c.state.get("state") == "completed" else None,
        "margin_log": [ln for ln in chain_log.splitlines() if "runner margin" in ln],
        "runner_rows": rows,
    }


# --------------------------------------------------------------------------- report
def render(results: dict[str, Any]) -> str:
    L = [
        f"# Adaptive runner margin: allocation efficiency ({results['date']})",
        "",
        "App: tests/faults/fault_app.py as a signal-only app (`" + APP_CMD + "`). "
        "Efficiency = useful app compute (iterations kept × s/iteration; a run keeps the counter the next "
        "run starts from − the one it started from) / runner wall "
        "(Σ runner jobs' start → end: slurmctld.log, ms; local: spool records); raw = every iteration computed, redone ones too, / runner wall. "
        "Redone = computed − kept. Cut saves = saves whose rename never happened (app killed mid-save). "
        "Chain wall = `chain submit` → completed. The runs started at one time (see each table's "
        "header) ran concurrently.",
        "",
    ]
    for backend, b in sorted(results["backends"].items(), key=lambda kv: kv[0] != "slurm"):
        s = b["setup"]
        L += [
            f"## {b['label']}",
            "",
            (
                f"Runner time {s['runner_time']}, MAX_ITER {s['max_iter']}, {s['iter_seconds']:g} s/iteration, "
                f"checkpoint every {s['checkpoint_every']} iterations, every save {s['save_delay']:g} s "
                f"(so a stop costs ≤ {s['iter_seconds'] + s['save_delay']:g} s + exit). {b['when']}."
            ),
            "",
            (
                "| scenario | margin | runners | margins per runner (s) | kills / cut saves | stop→exit (s) "
                "| runner wall (s) | useful compute (s) | **efficiency** | raw compute / wall | iterations redone "
                "| chain wall (s) | state |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in b["runs"]:
            mode = "adaptive" if r["adaptive"] else "fixed"
            L.append(
                f"| {r['scenario']} (floor {r['configured_margin']} s) | {mode} | {r['runners']} | "
                f"{', '.join(str(m) for m in r['margins'])} | {r['kills']} / {r['cut_saves']} | "
                f"{', '.join(fmt(x) for x in r['stop_to_exit_s'])} | {fmt(r['runner_wall_s'])} | "
                f"{fmt(r['useful_compute_s'], 0)} | **{fmt(r['efficiency'], 3)}** | "
                f"{fmt(r['raw_efficiency'], 3)} | {r['iterations_redone']} | {fmt(r['chain_wall_s'])} | "
                f"{r['state']}{'' if r['ok'] else ' ⚠'} |"
            )
        L += ["", "Per runner (job: margin, wall, computed/kept, killed, job state):", ""]
        for r in b["runs"]:
            mode = "adaptive" if r["adaptive"] else "fixed"
            L.append(
                f"- {r['scenario']} {mode}: "
                + "; ".join(
                    f"{x['job']}: {x['margin']} s, {fmt(x['wall_s'])} s, {x['computed']}/{x['kept']}"
                    f"{', killed' if x['killed'] else ''}, {x['job_state']}"
                    for x in r["runner_rows"]
                )
            )
            for ln in r["margin_log"]:
                L.append(f"  - chain.log: `{ln.strip()}`")
            for n in r["notes"][1:]:
                L.append(f"  - {n}")
        L.append("")
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("slurm", "local"), default="slurm")
    ap.add_argument("--quick", action="store_true", help="trial: MAX_ITER 50, short scenario only")
    ap.add_argument("--work", default=str(BENCH / ".work"), help="scratch directory (default %(default)s)")
    ap.add_argument("--out", default=str(BENCH / "results"), help="results directory (default %(default)s)")
    ap.add_argument(
        "--scenarios",
        help="comma-separated subset of the scenarios (default: all of the backend's; "
        "short, control, middle); their runs replace the same ones in the day's results",
    )
    ap.add_argument("--timeout", type=float, default=2400, help="seconds to wait for the chains")
    args = ap.parse_args()

    if args.backend == "slurm" and real("sinfo", "-h", "-o", "%P").returncode != 0:
        log('the Slurm controller does not answer: bash scripts/dev-cluster up; eval "$(bash scripts/dev-cluster env)"')
        return 2
    setup = QUICK if args.quick else FULL_LOCAL if args.backend == "local" else FULL
    if args.scenarios:
        wanted = args.scenarios.split(",")
        known = dict(FULL_LOCAL.scenarios)
        setup = Setup(**(setup.__dict__ | {"scenarios": tuple((n, known[n]) for n in wanted if n in known)}))
    base = Path(args.work) / time.strftime("%Y-%m-%dT%H%M%S")
    base.mkdir(parents=True, exist_ok=True)
    git = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    )
    t0 = time.strftime("%Y-%m-%d %H:%M") + f" (chain {git.stdout.strip() or '?'})"
    chains: list[Chain] = []
    try:
        for scenario, margin in setup.scenarios:
            for adaptive in (True, False):
                chains.append(submit(base, args.backend, setup, scenario, margin, adaptive))
        wait_all(chains, args.timeout)
    finally:
        cleanup(chains, args.backend)
    runs = [measure(c, args.backend, setup) for c in chains]

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    day = time.strftime("%Y-%m-%d")
    path = out / f"margin-{day}{'-quick' if args.quick else ''}.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"backends": {}}
    results["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    key = args.backend
    label = (
        (
            "real Slurm cluster (dev-cluster: "
            + real("sinfo", "-V").stdout.strip()
            + ", single node, minute-resolution limits, KillWait 30 s)"
        )
        if args.backend == "slurm"
        else "chain's local backend (`--backend local`, second-resolution limits, no Slurm)"
    )
    old = results["backends"].get(key, {}) if args.scenarios else {}
    new = {(r["scenario"], r["adaptive"]) for r in runs}
    runs = [r for r in old.get("runs", []) if (r["scenario"], r["adaptive"]) not in new] + runs
    when = (old.get("when", "") + "; " if old else "") + f"Started {t0}, work directory {base}"
    scen = dict(old.get("setup", {}).get("scenarios", [])) | dict(setup.scenarios)
    results["backends"][key] = {
        "label": label + (" — QUICK TRIAL" if args.quick else ""),
        "when": when,
        "setup": setup.__dict__ | {"scenarios": list(scen.items())},
        "runs": runs,
    }
    write_results(out, path.stem, results, render(results))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
