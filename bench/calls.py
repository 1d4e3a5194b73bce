#!/usr/bin/env python3
"""Slurm calls per runner-hour, measured on a ~20-minute runner.

The README's "calls per runner-hour" figure was a model of chain's
``PollPolicy``; the handoff bench's 20 s runners are too short to measure
it. This bench runs chains whose first runner lives ~21 minutes
(``--runner-time 22:00 --runner-margin 60``; ``examples/python/app.py`` with
10 s iterations, so runner 1 is stopped at its margin and runner 2 finishes
the work in ~1 minute) and counts every call to sbatch / squeue / sacct /
scontrol / scancel / sinfo / srun that chain's jobs make, with wrapper scripts
first on PATH (sbatch propagates PATH to the jobs). Each call is logged with
the job it came from: the caller's ``SLURM_JOB_ID`` or, when chain stripped
``SLURM_*`` from the call's environment (its sbatch), that of the calling
process (``/proc/$PPID/environ``). The calls are split by command and by job
kind (submitter job, runner job, the login node's ``chain submit``).

Counted windows, per chain:
  * cycle: runner 1's app start → runner 2's app start. One runner's whole
    share in the steady state: the polls while it runs, the queries when it
    ends, the sbatch of its successor, and the successor's own start-up calls
    before its app starts (end-time query; in relay mode also the judgment
    of its predecessor and the sbatch of the next runner). Runner 1's own
    start-up calls (before its app start) are left out, so no start-up is
    counted twice. Per hour of that cycle.
  * runner 1's life: its job's allocation → its completion (slurmctld.log).
  * the whole chain: ``chain submit`` → the last job of the chain ended.
The model beside it: ``PollPolicy`` (chain/core/poll.py, with the default
``--poll-max``) stepped over one runner of the measured time limit and over
one of 24 h, plus the runner's end-time query, the two queries at its end and
the next sbatch (as bench/handoff.py's model). The model leaves out the
submitter's own restarts: with the default ``--submitter-time 3:30`` the
submitter hands over to a successor job every ~2.5 min, and each one's
sbatch and start-up queries fall inside the runner's life; the mode
``submitter_long`` (``--submitter-time 30:00``, no restart during the
chain) measures the poll policy alone.

Modes (run concurrently, each its own chain): ``submitter`` (defaults),
``submitter_long`` and ``relay`` (``--mode relay``: no submitter job).

Run (~25 min; the dev cluster must be up):
    eval "$(bash scripts/dev-cluster env)"
    .venv/bin/python bench/calls.py                 # writes bench/results/calls-<date>.{md,json}
    .venv/bin/python bench/calls.py --quick         # ~3-min trial: 1:30 runners, 2 s iterations
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from handoff import (
    APP,
    BENCH,
    PY,
    REAL_BIN,
    ROOT,
    WRAPPED,
    Run,
    Workspace,
    chain_done,
    ctld_events,
    git_commit,
    log,
    machine,
    parse_iterlog,
    read_ids,
    sacct_times,
    submit_chain,
    timed,
    wait_chain_jobs,
    wait_state,
    write_results,
)

MODES: dict[str, list[str]] = {
    "submitter": [],
    "submitter_long": ["--submitter-time", "30:00"],
    "relay": ["--mode", "relay"],
}
KINDS = ("submitter", "runner", "login")


@dataclass(frozen=True)
class Shape:
    """The chain's shape: runner 1 is stopped at its margin, runner 2 finishes."""

    runner_time: str  # Slurm syntax, as given to --runner-time
    runner_seconds: int
    margin: int
    iter_seconds: float
    checkpoint_every: int

    @property
    def max_iter(self) -> int:
        window = (self.runner_seconds - self.margin) / self.iter_seconds
        return int(window) + 3 * self.checkpoint_every // 2  # runner 2: a few iterations more


FULL = Shape("22:00", 22 * 60, 60, 10.0, 6)
QUICK = Shape("1:30", 90, 30, 2.0, 6)


@dataclass(frozen=True)
class Call:
    t: float
    job: str  # the job the call came from ("-": none, the login node)
    cmd: str
    args: str


# --------------------------------------------------------------------------- the model
def model(runner_seconds: float, stop_at: float | None = None) -> dict[str, Any]:
    """Calls chain's poll policy plans for one runner of ``runner_seconds``:
    the submitter's queries while it runs (one at adoption, then on
    ``next_slurm_query``'s schedule up to its expected end, the job's end), the
    runner's own end-time query, squeue + sacct when it has ended, and the next
    sbatch. With ``stop_at`` (seconds after the start: the stop signal, at the
    limit less the margin) only the scheduled queries before it count: the
    runner's end record then ends the polling."""
    sys.path.insert(0, str(ROOT))
    from chain.core.poll import PollPolicy
    from chain.core.settings import Settings

    longest = float(Settings().poll_max)
    pol = PollPolicy(slurm_min=min(PollPolicy().slurm_min, longest), slurm_max=longest)
    until = runner_seconds if stop_at is None else stop_at
    t, queries = 0.0, 1
    while (t := pol.next_slurm_query(t, runner_seconds)) < until:
        queries += 1
    per_runner = queries + 1 + 2 + 1
    hours = runner_seconds / 3600
    return {
        "runner_seconds": runner_seconds,
        "stop_at": stop_at,
        "poll_max": longest,
        "squeue_while_running": queries,
        "per_runner": per_runner,
        "per_runner_hour": round(per_runner / hours, 2),
    }


def models(shape: Shape) -> dict[str, dict[str, Any]]:
    """The model for the measured limit and for 24 h, polling up to the job's
    end (as the README's figure) and up to the stop signal (as measured)."""
    day = 24 * 3600
    return {
        "measured_limit": model(shape.runner_seconds),
        "24h": model(day),
        "measured_limit_to_stop": model(shape.runner_seconds, shape.runner_seconds - shape.margin),
        "24h_to_stop": model(day, day - shape.margin),
    }


# --------------------------------------------------------------------------- running a chain
SHIM = """#!/bin/bash
# bench/calls.py wrapper: log the call and the job it came from, then run the real client
job=${{SLURM_JOB_ID:-$(tr '\\0' '\\n' < /proc/$PPID/environ 2>/dev/null | sed -n 's/^SLURM_JOB_ID=//p' | head -n1)}}
printf '%s %s %s %s\\n' "$EPOCHREALTIME" "${{job:--}}" {cmd} "$*" >> "${{BENCH_CALLS_FILE:-/dev/null}}"
exec {real}/{cmd} "$@"
"""


def workspace(base: Path, name: str, shape: Shape) -> Workspace:
    d = base / name
    shutil.rmtree(d, ignore_errors=True)
    (d / "bin").mkdir(parents=True)
    shutil.copy(APP, d / "app.py")
    calls = d / "slurm_calls.log"
    calls.touch()
    for cmd in WRAPPED:
        (d / "bin" / cmd).write_text(SHIM.format(cmd=cmd, real=REAL_BIN))
        (d / "bin" / cmd).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_")) or k == "SLURM_CONF"}
    for k in ("CHAIN_DIR", "MAX_ITER", "APP_CMD", "CKPT_PATH", "CHECKPOINT_EVERY"):
        env.pop(k, None)
    env.update(
        PATH=f"{d / 'bin'}:{Path(PY).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        BENCH_CALLS_FILE=str(calls),
        ITER_SECONDS=str(shape.iter_seconds),
    )
    return Workspace(name, d, env, calls)


def run_chain(ws: Workspace, shape: Shape, extra: list[str], timeout: float) -> None:
    argv = [
        PY,
        "-m",
        "chain",
        "submit",
        "--max-iter",
        str(shape.max_iter),
        "--app-cmd",
        "python3 app.py",
        "--checkpoint-every",
        str(shape.checkpoint_every),
        "--runner-time",
        shape.runner_time,
        "--runner-margin",
        str(shape.margin),
        "--backend",
        "slurm",
        "--partition",
        "debug",
        *extra,
    ]
    ws.notes.append("command: chain " + " ".join(argv[3:]))
    if submit_chain(ws, argv).returncode != 0:
        return
    state = wait_state(ws.dir / ".chain" / "state.json", ws.t_submit + timeout, poll=1.0)
    if state.get("state") != "completed":
        ws.ok = False
        ws.notes.append(f"chain ended {state.get('state')!r}: {state.get('reason', '')}")
        subprocess.run([PY, "-m", "chain", "cancel"], cwd=ws.dir, env=ws.env, capture_output=True, check=False)
    ws.t_done, ws.done_how = chain_done(state)
    ws.chain_id = str(state.get("chain_id", ""))
    wait_chain_jobs(ws, time.time() + 90)  # the last job's last calls
    time.sleep(2)
    ws.jobs = read_ids(ws.dir / ".chain" / "worker_ids.txt")
    ws.submitter_jobs = read_ids(ws.dir / ".chain" / "submitter_ids.txt")


# --------------------------------------------------------------------------- counting
def read_calls(path: Path) -> list[Call]:
    out = []
    for line in path.read_text().splitlines():
        f = line.split(" ", 3)
        if len(f) >= 3:
            out.append(Call(float(f[0]), f[1], f[2], f[3] if len(f) > 3 else ""))
    return out


def kind_of(call: Call, ws: Workspace) -> str:
    if call.job == "-":
        return "login"
    if call.job in ws.jobs:
        return "runner"
    return "submitter" if call.job in ws.submitter_jobs else f"other job {call.job}"


def purpose(call: Call, chain_id: str) -> str:
    """What the call was for, from its arguments."""
    if call.cmd == "sbatch":
        m = re.search(r"--job-name=\S*?\.([sr])\d+", call.args)
        return {"s": "sbatch of a submitter", "r": "sbatch of a runner"}.get(m.group(1) if m else "", "sbatch")
    if call.cmd == "squeue":
        return "squeue --name (find by name)" if "--name=" in call.args else "squeue -j"
    return call.cmd


def tally(calls: list[Call], ws: Workspace) -> dict[str, Any]:
    by_cmd: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    by_cmd_kind: dict[str, int] = {}
    by_purpose: dict[str, int] = {}
    for c in calls:
        k = kind_of(c, ws)
        by_cmd[c.cmd] = by_cmd.get(c.cmd, 0) + 1
        by_kind[k] = by_kind.get(k, 0) + 1
        by_cmd_kind[f"{c.cmd} by {k}"] = by_cmd_kind.get(f"{c.cmd} by {k}", 0) + 1
        p = f"{purpose(c, ws.chain_id)} ({k})"
        by_purpose[p] = by_purpose.get(p, 0) + 1
    return {
        "total": len(calls),
        "by_command": by_cmd,
        "by_kind": by_kind,
        "by_command_and_kind": by_cmd_kind,
        "by_purpose": by_purpose,
    }


def window(calls: list[Call], t0: float | None, t1: float | None) -> list[Call]:
    if t0 is None or t1 is None:
        return []
    return [c for c in calls if t0 <= c.t <= t1]


def job_span(job: str) -> tuple[float | None, float | None, str]:
    """Allocation and completion of a job: slurmctld.log (ms), else sacct (1 s)."""
    ev = ctld_events([job])[job]
    if ev.get("allocate") and ev.get("complete"):
        return ev["allocate"], ev["complete"], "slurmctld.log"
    st = sacct_times(job)
    return st.get("start"), st.get("end"), "sacct Start/End"


def app_runs(ws: Workspace) -> list[Run]:
    runs = parse_iterlog(ws.dir / "iterations.log")
    used: list[Run] = []
    for r in runs:
        used.append(r)
        if r.code == 0:
            break
    return used


def measure(ws: Workspace, runner_seconds: int) -> dict[str, Any]:
    calls = read_calls(ws.calls_file)
    runs = app_runs(ws)
    res: dict[str, Any] = {
        "mode": ws.name,
        "ok": ws.ok,
        "notes": ws.notes,
        "workdir": str(ws.dir),
        "chain_id": ws.chain_id,
        "runner_jobs": ws.jobs,
        "submitter_jobs": ws.submitter_jobs,
        "app_runs": [
            {"job": r.job, "start": r.start, "exit": r.exit, "code": r.code, "iterations": r.iters} for r in runs
        ],
    }
    others = sorted({kind_of(c, ws) for c in calls} - set(KINDS))
    if others:
        res["notes"].append(f"calls from jobs not of this chain's record: {others}")
    res["whole_chain"] = tally([c for c in calls if c.t >= ws.t_submit], ws)
    if len(runs) < 2:
        res["ok"] = False
        res["notes"].append(f"{len(runs)} app run(s): no complete runner cycle")
        return res
    r1, r2 = runs[0], runs[1]
    cycle = window(calls, r1.start, r2.start)
    cycle_s = r2.start - r1.start
    alloc, complete, how = job_span(r1.job)
    life = window(calls, alloc, complete)
    life_s = (complete - alloc) if alloc and complete else None
    submitter_restarts = sum(1 for c in cycle if purpose(c, ws.chain_id) == "sbatch of a submitter")
    res.update(
        {
            "runner1_job": r1.job,
            "runner1_app_s": (r1.exit - r1.start) if r1.exit else None,
            "runner1_alloc": alloc,
            "runner1_complete": complete,
            "runner1_span_from": how,
            "runner1_wall_s": life_s,
            "runner_time_limit_s": runner_seconds,
            "cycle_s": cycle_s,
            "cycle": tally(cycle, ws),
            "cycle_calls_per_hour": round(len(cycle) / (cycle_s / 3600), 2),
            "submitter_restarts_in_cycle": submitter_restarts,
            "runner1_life": tally(life, ws),
            "runner1_life_calls_per_hour": round(len(life) / (life_s / 3600), 2) if life_s else None,
            "cycle_call_log": [f"{c.t - r1.start:+.1f} {kind_of(c, ws)} {c.job} {c.cmd} {c.args}" for c in cycle],
        }
    )
    return res


# --------------------------------------------------------------------------- report
def fmt(x: Any, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def render(results: dict[str, Any]) -> str:
    m, sh = results["machine"], results["shape"]
    L = [
        f"# Slurm calls per runner-hour, measured (`bench/calls.py`), {results['date']}",
        "",
        (
            f"Machine: {m['nproc']} CPUs, Debian {m['debian_version']}, {m['slurm']}; commit {results['git']['commit']} "
            f"(clone at {results['root']}). Chain: `--runner-time {sh['runner_time']} --runner-margin {sh['margin']}`, "
            f"app `examples/python/app.py` with ITER_SECONDS={sh['iter_seconds']}, MAX_ITER={sh['max_iter']}, "
            f"CHECKPOINT_EVERY={sh['checkpoint_every']} (runner 1 is stopped at its margin, runner 2 finishes)."
        ),
        "",
        (
            "| mode | ok | runner 1 wall | cycle (app start → next app start) | calls in the cycle | "
            "submitter / runner | per hour of cycle | submitter restarts in it | calls in runner 1's life | "
            "model: per runner, per runner-hour (same limit) | load start → end | started |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    mod = results["model"]["measured_limit"]
    for r in results["runs"]:
        cy = r.get("cycle", {})
        k = cy.get("by_kind", {})
        L.append(
            f"| {r['mode']} | {r['ok']} | {fmt(r.get('runner1_wall_s'), 0)} s | {fmt(r.get('cycle_s'), 0)} s | "
            f"{cy.get('total', '-')} | {k.get('submitter', 0)} / {k.get('runner', 0)} | "
            f"**{fmt(r.get('cycle_calls_per_hour'))}** | {r.get('submitter_restarts_in_cycle', '-')} | "
            f"{r.get('runner1_life', {}).get('total', '-')} | {mod['per_runner']}, {mod['per_runner_hour']} | "
            f"{r.get('loadavg_start')} → {r.get('loadavg_end')} | {r.get('started_at', '')} |"
        )
    day = results["model"]["24h"]
    L += [
        "",
        (
            f"Model for a 24 h runner: {day['per_runner']} calls per runner, **{day['per_runner_hour']} per "
            f"runner-hour** ({day['squeue_while_running']} squeue while it runs, poll-max {day['poll_max']:.0f} s); "
            f"for the measured limit ({mod['runner_seconds']} s): {mod['squeue_while_running']} squeue while it runs, "
            f"{mod['per_runner']} per runner."
        ),
        "",
    ]
    if "24h_to_stop" in results["model"]:
        ms, ds = results["model"]["measured_limit_to_stop"], results["model"]["24h_to_stop"]
        L += [
            (
                f"Polling stops when the runner records its end, after the stop signal ({sh['margin']} s before "
                f"the limit): counting only the scheduled queries before it, the model gives {ms['per_runner']} "
                f"per runner for the measured limit ({ms['squeue_while_running']} squeue while it runs) and "
                f"{ds['per_runner']} for 24 h (**{ds['per_runner_hour']} per runner-hour**)."
            ),
            "",
        ]
    L += ["## Calls in the cycle, by command and job kind", ""]
    for r in results["runs"]:
        if "cycle" in r:
            L.append(f"- {r['mode']}: {r['cycle']['by_command_and_kind']}; by purpose {r['cycle']['by_purpose']}")
    L += ["", "## Whole chain (chain submit → the last job ended)", ""]
    for r in results["runs"]:
        w = r["whole_chain"]
        L.append(f"- {r['mode']}: {w['total']} calls; by kind {w['by_kind']}; by command {w['by_command']}")
    notes = [f"- {r['mode']}: {n}" for r in results["runs"] for n in r["notes"]]
    if notes:
        L += ["", "## Notes", "", *notes]
    L += ["", results["counting"], ""]
    return "\n".join(L)


COUNTING = (
    "What is counted: every call to sbatch/squeue/sacct/scontrol/scancel/sinfo/srun by the chain's "
    "jobs (submitter and runner jobs) and by `chain submit`, through wrappers first on PATH; the bench's "
    "own calls (/usr/bin directly) are not. The cycle is runner 1's app start → runner 2's app start: "
    "the polls while runner 1 runs, the queries at its end, runner 2's sbatch and runner 2's start-up "
    "calls before its app (relay: its judgment of runner 1 and its sbatch of runner 3). In submitter "
    "mode it also holds every submitter restart (`--submitter-time`) in that time: the successor "
    "submitter's sbatch and its start-up queries. Per hour of cycle = calls / cycle length."
)


def run_mode(base: Path, name: str, shape: Shape, timeout: float, out: list[dict[str, Any]]) -> None:
    ws = workspace(base, name, shape)
    notes: dict[str, Any] = {}
    timed(run_chain, notes, ws, shape, MODES[name], timeout)
    res = measure(ws, shape.runner_seconds)
    res.update(notes)
    if notes.get("overlapped_fault_suite"):
        res["ok"] = False
        res["notes"].append("a fault suite overlapped the run: discard it")
    out.append(res)
    log(
        f"{name}: ok={res['ok']} cycle calls={res.get('cycle', {}).get('total')} "
        f"per hour={res.get('cycle_calls_per_hour')}"
    )


def rerender(path: Path) -> int:
    """Recompute the model (from this checkout's PollPolicy) and the table of
    an earlier results file; the measurements are kept as they are."""
    results = json.loads(path.read_text())
    results["model"] = models(Shape(**{k: v for k, v in results["shape"].items() if k != "max_iter"}))
    results["rendered_by"] = {"git": git_commit(), "at": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    write_results(path.parent, path.name.removesuffix(".json"), results, render(results))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, run concurrently (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="trial: 1:30 runners, 2 s iterations (~3 min)")
    ap.add_argument("--stem", help="results file name (default calls-<date>; calls-quick-<date> with --quick)")
    ap.add_argument("--out", default=str(BENCH / "results"))
    ap.add_argument("--render", metavar="JSON", help="re-render a results file's .md (and its model) without running")
    args = ap.parse_args()
    shape = QUICK if args.quick else FULL
    if args.render:
        return rerender(Path(args.render))
    modes = [m for m in args.modes.split(",") if m]
    date = time.strftime("%Y-%m-%d")
    base = BENCH / ".work" / f"{time.strftime('%Y-%m-%dT%H%M%S')}-calls"
    timeout = 2 * shape.runner_seconds + 600
    runs: list[dict[str, Any]] = []
    threads = [threading.Thread(target=run_mode, args=(base, m, shape, timeout, runs)) for m in modes]
    for t in threads:
        t.start()
        time.sleep(2)
    for t in threads:
        t.join()
    runs.sort(key=lambda r: modes.index(r["mode"]))
    results = {
        "date": date,
        "root": str(ROOT),
        "machine": machine(),
        "git": git_commit(),
        "shape": {**shape.__dict__, "max_iter": shape.max_iter},
        "model": models(shape),
        "counting": COUNTING,
        "runs": runs,
    }
    stem = args.stem or (f"calls-quick-{date}" if args.quick else f"calls-{date}")
    write_results(Path(args.out), stem, results, render(results))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
