#!/usr/bin/env python3
"""Handoff with a ``torch:`` counter vs a plain counter file, on the local backend.

A ``torch:PATH:KEY`` counter (``--counter-cmd torch:ckpt.pt:iter``) is read
by ``chain.store.torch_counter.plain_counter`` without importing torch; the
target is a handoff no more than 0.5 s slower than one whose counter is the
contract's plain file. Two chains run side by side in every round (started
half a runner window apart, the first one alternating), with the same app
(``bench/counter_app.py``: ``examples/python/app.py`` that also imports torch
and ``torch.save``s a nanoGPT-like state dict of ``--ckpt-mb`` MB at every
checkpoint) on chain's embedded local backend (no Slurm):

  torch  the counter is the checkpoint's ``iter`` key:
         ``chain submit ... --counter-cmd torch:ckpt.pt:iter``
  file   the counter is CKPT_PATH (no ``--counter-cmd``); ``ckpt.pt`` is
         written all the same, without the key

Each chain: MAX_ITER 40 iterations of 0.5 s, a checkpoint every 5,
``--runner-time 0:12 --runner-margin 4`` (an 8 s window): 4 runners, 3
handoffs. A handoff is one run's app ``exit`` → the next run's app launch
(the app logs its process's start time, taken before it imports anything,
so its own start-up, import torch and load, is not in it: that is in
``app_startup.log`` and reported apart). Where it goes, per handoff, from
the runner records (``.chain/runners/<job>.json``) and the local backend's
job records (``.chain/local-jobs/jobs/<job>.json``): app exit → the runner's
record ``end`` (the runner reads the counter after its app) → the runner's
job ends → the submitter submits the next runner (it reads the counter and
judges) → the local backend starts it → the app's launch (the runner's
start-up, then ``bash -c``).

Then the reader alone, on the last torch chain's ``ckpt.pt``: ``plain_counter``
in this process (which has not imported torch) and in a fresh interpreter
(checking that torch stays unimported), ``python -m chain.store.torch_counter``
(the fallback chain uses for what the plain reader cannot read), and
``torch.load`` in a fresh interpreter (import torch + load).

    .venv/bin/python bench/counter_handoff.py                 # 4 rounds, ~4 min
    .venv/bin/python bench/counter_handoff.py --rounds 1      # a trial, ~1 min

Writes bench/results/counter-handoff-<date>.json and .md (``--stem`` to name
them otherwise) and prints the table; records the machine, the commit
measured and the load around every chain as ``handoff.py`` does.
Scratch: bench/.work/<timestamp>/<kind>-<round>/. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from handoff import BENCH, PY, Run, fmt, git_commit, loadavg, log, med, parse_iterlog, write_results

APP = BENCH / "counter_app.py"
KINDS = ("torch", "file")
ENDED = ("completed", "failed", "stopped", "cancelled")
MAX_ITER = 40
CHECKPOINT_EVERY = 5
ITER_SECONDS = 0.5
RUNNER_TIME = "0:12"
RUNNER_MARGIN = 4
STAGGER = 6.0  # seconds between the two chains of a round: half a window, so their handoffs do not coincide
TARGET = 0.5  # seconds: a torch: handoff's allowance over a plain counter file's
SEGMENTS = (
    ("exit_to_record_end", "app exit → runner record end (runner reads the counter)"),
    ("record_end_to_job_end", "→ runner job ends"),
    ("job_end_to_next_submit", "→ next runner submitted (submitter reads the counter, judges)"),
    ("submit_to_next_start", "→ next runner started (local backend)"),
    ("next_start_to_launch", "→ app launch (runner start-up, bash -c)"),
)


# --------------------------------------------------------------------------- a chain
def workspace(base: Path, name: str, kind: str, ckpt_mb: float) -> tuple[Path, dict[str, str]]:
    d = base / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    shutil.copy(APP, d / "app.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env["PATH"] = f"{Path(PY).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # python3 = the venv's
    env.update(BENCH_COUNTER=kind, BENCH_CKPT_MB=str(ckpt_mb), ITER_SECONDS=str(ITER_SECONDS))
    for k in ("CHAIN_DIR", "MAX_ITER", "APP_CMD", "CKPT_PATH", "CHECKPOINT_EVERY", "CHAIN_BACKEND", "CHAIN_MODE"):
        env.pop(k, None)
    return d, env


def submit(d: Path, env: dict[str, str], kind: str, mode: str) -> dict[str, Any]:
    argv = [PY, "-m", "chain", "submit", "--max-iter", str(MAX_ITER), "--app-cmd", "python3 app.py"]
    argv += ["--checkpoint-every", str(CHECKPOINT_EVERY), "--runner-time", RUNNER_TIME]
    argv += ["--runner-margin", str(RUNNER_MARGIN), "--backend", "local", "--mode", mode]
    argv += ["--counter-cmd", "torch:ckpt.pt:iter"] if kind == "torch" else []
    run: dict[str, Any] = {"kind": kind, "dir": str(d), "command": " ".join(["chain", *argv[3:]])}
    run["loadavg_start"], run["started_at"] = loadavg(), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    run["t_submit"] = time.time()
    p = subprocess.run(argv, cwd=d, env=env, capture_output=True, text=True, check=False)
    log(f"{d.name}: {p.stdout.strip()} {p.stderr.strip()}")
    run["ok"] = p.returncode == 0
    run["notes"] = [] if run["ok"] else [f"chain submit failed: {p.stderr.strip()}"]
    return run


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def wait_all(runs: list[dict[str, Any]], timeout: float) -> None:
    deadline = time.time() + timeout
    pending = [r for r in runs if r["ok"]]
    while pending and time.time() < deadline:
        time.sleep(0.5)
        for r in list(pending):
            state = read_json(Path(r["dir"]) / ".chain" / "state.json")
            if state.get("state") in ENDED:
                pending.remove(r)
                r["t_done"], r["loadavg_end"] = time.time(), loadavg()
                log(f"{Path(r['dir']).name}: {state['state']} {state.get('reason', '')}")
    for r in runs:
        state = read_json(Path(r["dir"]) / ".chain" / "state.json")
        r["state"] = state.get("state")
        if r["state"] != "completed":
            r["ok"] = False
            r["notes"].append(f"chain ended {r['state']!r}: {state.get('reason', '')}")
            logs = sorted((Path(r["dir"]) / ".chain" / "logs").glob("submitter-*.out"))
            errors = [x for f in logs for x in f.read_text(errors="replace").splitlines() if "error" in x.lower()]
            r["notes"] += [f"{logs[-1].name}: {errors[-1].strip()}"] if errors else []
            subprocess.run([PY, "-m", "chain", "cancel"], cwd=r["dir"], capture_output=True, check=False, timeout=120)


def chain_files() -> dict[str, str]:
    """The content of this checkout's chain/ (what the jobs run: the editable install), file by file."""
    root = BENCH.parent / "chain"
    return {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()[:12] for f in sorted(root.rglob("*.py"))
    }


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


# --------------------------------------------------------------------------- measurement
def span(x: Any, y: Any) -> float | None:
    return round(y - x, 3) if isinstance(x, (int, float)) and isinstance(y, (int, float)) else None


def measure(run: dict[str, Any]) -> None:
    d = Path(run["dir"])
    runs = parse_iterlog(d / "iterations.log")
    used: list[Run] = []
    for r in runs:
        used.append(r)
        if r.code == 0:
            break
    done = [int(line.split()[2]) for line in (d / "iterations.log").read_text().splitlines() if " iter " in line]
    run["runners"] = len(used)
    run["iterations_once"] = sorted(set(done)) == list(range(1, MAX_ITER + 1))
    run["iterations_redone"] = len(done) - len(set(done))
    run["app_exit_codes"] = [r.code for r in used]
    startup = (
        [line.split() for line in (d / "app_startup.log").read_text().splitlines()]
        if (d / "app_startup.log").exists()
        else []
    )
    run["app_startup_s"] = [float(f[1]) for f in startup]  # the app's own: import torch, load the checkpoint
    rows = []
    for a, b in pairwise(used):
        if a.exit is None:
            continue
        rec = read_json(d / ".chain" / "runners" / f"{a.job}.json")
        job_a = read_json(d / ".chain" / "local-jobs" / "jobs" / f"{a.job}.json")
        job_b = read_json(d / ".chain" / "local-jobs" / "jobs" / f"{b.job}.json")
        rows.append(
            {
                "from_job": a.job,
                "to_job": b.job,
                "counter": a.end_iter,
                "handoff_s": round(b.start - a.exit, 3),
                "exit_to_record_end": span(a.exit, rec.get("end")),
                "record_end_to_job_end": span(rec.get("end"), job_a.get("end")),
                "job_end_to_next_submit": span(job_a.get("end"), job_b.get("submit_time")),
                "submit_to_next_start": span(job_b.get("submit_time"), job_b.get("start")),
                "next_start_to_launch": span(job_b.get("start"), b.start),
                "iter_before_next": read_json(d / ".chain" / "runners" / f"{b.job}.json").get("iter_before"),
            }
        )
    run["handoffs"] = rows
    hs = [h["handoff_s"] for h in rows]
    run["handoff_median_s"] = med(hs)
    run["handoff_max_s"] = max(hs, default=None)
    # the counter chain read before each next runner is the one the app saved
    run["counters_agree"] = all(h["iter_before_next"] == h["counter"] for h in rows)
    state = read_json(d / ".chain" / "state.json")
    run["final_iteration"] = state.get("iteration", state.get("iter"))
    run["submit_to_done_s"] = span(run["t_submit"], run.get("t_done"))
    if not rows or not run["counters_agree"]:
        run["ok"] = False
        run["notes"].append("no handoff measured" if not rows else "a runner started from another counter")


# --------------------------------------------------------------------------- the reader alone
def fresh(code: str, *args: str, repeat: int) -> dict[str, Any]:
    """Wall times of a fresh interpreter running CODE (median, min, max) and its last stdout."""
    walls, out = [], ""
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.run(
            [PY, *args] if not code else [PY, "-c", code, *args], capture_output=True, text=True, check=False
        )
        walls.append(time.perf_counter() - t)
        out = p.stdout.strip() or p.stderr.strip()[-200:]
    return {
        "median_s": round(statistics.median(walls), 4),
        "min_s": round(min(walls), 4),
        "max_s": round(max(walls), 4),
        "out": out,
    }


PLAIN_FRESH = (
    "import sys, time; t = time.perf_counter()\n"
    "from chain.store.torch_counter import plain_counter\n"
    "v = plain_counter(sys.argv[1], 'iter'); e = time.perf_counter() - t\n"
    "print(v, round(e, 4), 'torch' in sys.modules)"
)
TORCH_FRESH = (
    "import sys, time; t = time.perf_counter()\n"
    "import torch; i = time.perf_counter()\n"
    "v = torch.load(sys.argv[1], map_location='cpu', weights_only=True)['iter']; e = time.perf_counter()\n"
    "print(v, round(i - t, 4), round(e - i, 4))"
)


def reader_alone(ckpt: Path, counter_file: Path | None, repeat: int) -> dict[str, Any]:
    from chain.store.jsonio import read_counter
    from chain.store.torch_counter import plain_counter

    assert "torch" not in sys.modules, "the bench must not import torch itself"
    res: dict[str, Any] = {"file": str(ckpt), "size_mb": round(ckpt.stat().st_size / (1 << 20), 2), "repeat": repeat}
    with __import__("zipfile").ZipFile(ckpt) as z:
        res["data_pkl_kb"] = round(sum(i.file_size for i in z.infolist() if i.filename.endswith("/data.pkl")) / 1024, 1)
    ts = []
    for _ in range(repeat * 4):
        t = time.perf_counter()
        value = plain_counter(ckpt, "iter")
        ts.append(time.perf_counter() - t)
    res["plain_counter_in_process"] = {
        "median_s": round(statistics.median(ts), 5),
        "max_s": round(max(ts), 5),
        "value": value,
    }
    res["torch_imported_by_bench"] = "torch" in sys.modules
    if counter_file is not None and counter_file.exists():
        ts = []
        for _ in range(repeat * 4):
            t = time.perf_counter()
            read_counter(counter_file)
            ts.append(time.perf_counter() - t)
        res["counter_file_in_process"] = {"median_s": round(statistics.median(ts), 5), "max_s": round(max(ts), 5)}
    res["plain_counter_fresh"] = fresh(PLAIN_FRESH, str(ckpt), repeat=repeat)
    res["torch_counter_module_fresh"] = fresh("", "-m", "chain.store.torch_counter", str(ckpt), "iter", repeat=repeat)
    res["torch_load_fresh"] = fresh(TORCH_FRESH, str(ckpt), repeat=repeat)
    res["python_pass_fresh"] = fresh("pass", repeat=repeat)
    return res


# --------------------------------------------------------------------------- the table
def kind_summary(runs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    mine = [r for r in runs if r["kind"] == kind and r["ok"]]
    hs = [h for r in mine for h in r["handoffs"]]
    ho = [h["handoff_s"] for h in hs]
    return {
        "chains": len(mine),
        "handoffs": len(ho),
        "median_s": med(ho),
        "max_s": max(ho, default=None),
        "min_s": min(ho, default=None),
        "mean_s": round(statistics.fmean(ho), 3) if ho else None,
        "segments": {k: med([h[k] for h in hs if h[k] is not None]) for k, _ in SEGMENTS},
        "app_startup_median_s": med([s for r in mine for s in r["app_startup_s"]]),
        "submit_to_done_median_s": med([r["submit_to_done_s"] for r in mine if r["submit_to_done_s"] is not None]),
    }


def render(res: dict[str, Any]) -> str:
    s = {k: res["summary"][k] for k in KINDS}
    diff = res["summary"]["difference"]
    L = [
        f"# Handoff with a `torch:` counter vs a plain counter file ({res['date']})",
        "",
        f"`bench/counter_handoff.py`, chain's local backend (`--backend local --mode {res['setup']['mode']}`, no Slurm), "
        f"{res['setup']['rounds']} round(s) of two chains side by side (started {STAGGER:.0f} s apart, the first alternating). "
        f"Machine: {res['machine']['nproc']} CPUs, Debian {res['machine']['debian_version']}; chain at {res['git']['commit']}"
        + (
            f" (`git status --short chain/`: {', '.join(res['git']['git_status_short_chain'])})"
            if res["git"]["git_status_short_chain"]
            else ""
        )
        + f". Load average (1, 5, 15 min) at the start {res['loadavg_start']}, at the end {res['loadavg_end']}.",
        "",
    ]
    if res.get("note"):
        L += [f"**Note:** {res['note']}", ""]
    if res["chain_changed_during"]:
        L += [
            "**chain/ changed during the runs** (others' edits in this checkout; the jobs run it as it is): "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in res["chain_changed_during"].items())
            + f" (at the end: {res['git_after']['commit']}). The two chains of a round ran side by side, through the same edits.",
            "",
        ]
    else:
        L += ["chain/'s files did not change during the runs (checked after every round).", ""]
    L += [
        (
            f"App: `bench/counter_app.py`, {MAX_ITER} iterations of {ITER_SECONDS} s, a checkpoint every {CHECKPOINT_EVERY} "
            f"(`torch.save` of a nanoGPT-like dict, {res['reader']['size_mb']} MB, `data.pkl` {res['reader']['data_pkl_kb']} KB), "
            f"`--runner-time {RUNNER_TIME} --runner-margin {RUNNER_MARGIN}`. Handoff = one run's app exit → the next run's app "
            "launch (the app's process start, before its imports)."
        ),
        "",
        "| counter | chains | handoffs | handoff median | max | min | mean | app's own start-up (import torch, load), median | submit → done, median |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {"torch": "`--counter-cmd torch:ckpt.pt:iter`", "file": "plain file CKPT_PATH"}
    for k in KINDS:
        v = s[k]
        L.append(
            f"| {names[k]} | {v['chains']} | {v['handoffs']} | **{fmt(v['median_s'], 3)} s** | {fmt(v['max_s'], 3)} s | "
            f"{fmt(v['min_s'], 3)} s | {fmt(v['mean_s'], 3)} s | {fmt(v['app_startup_median_s'], 2)} s | {fmt(v['submit_to_done_median_s'], 1)} s |"
        )
    met = (
        diff["median_s"] is not None
        and diff["median_s"] <= TARGET
        and diff["max_s"] is not None
        and diff["max_s"] <= TARGET
    )
    L += [
        "",
        (
            f"**torch − file: median {fmt(diff['median_s'], 3)} s, max {fmt(diff['max_s'], 3)} s, mean {fmt(diff['mean_s'], 3)} s** "
            f"(target ≤ {TARGET} s: {'met' if met else 'NOT met'})."
        ),
        "",
        "Where a handoff goes (medians over the handoffs):",
        "",
        "| segment | torch | file | torch − file |",
        "| --- | --- | --- | --- |",
    ]
    for key, label in SEGMENTS:
        a, b = s["torch"]["segments"][key], s["file"]["segments"][key]
        L.append(
            f"| {label} | {fmt(a, 3)} s | {fmt(b, 3)} s | {fmt(round(a - b, 3) if a is not None and b is not None else None, 3)} s |"
        )
    rd = res["reader"]
    pf, tm, tl, pp = (
        rd["plain_counter_fresh"],
        rd["torch_counter_module_fresh"],
        rd["torch_load_fresh"],
        rd["python_pass_fresh"],
    )
    L += [
        "",
        (
            f"The reader alone, on the last torch chain's `ckpt.pt` ({rd['size_mb']} MB; medians of {rd['repeat']} fresh "
            f"interpreters, in-process ones of {rd['repeat'] * 4} calls):"
        ),
        "",
        "| read | time | |",
        "| --- | --- | --- |",
        f"| `plain_counter` in a process without torch | {rd['plain_counter_in_process']['median_s'] * 1000:.2f} ms | value {rd['plain_counter_in_process']['value']}; torch imported after it: {rd['torch_imported_by_bench']} |",
    ]
    if "counter_file_in_process" in rd:
        L.append(
            f"| plain counter file (`read_counter`), in process | {rd['counter_file_in_process']['median_s'] * 1000:.2f} ms | |"
        )
    L += [
        f"| fresh `python -c 'from chain.store.torch_counter import plain_counter; …'` | {pf['median_s']:.3f} s wall (max {pf['max_s']:.3f}) | prints value, in-process s, torch imported: `{pf['out']}` |",
        f"| fresh `python -m chain.store.torch_counter ckpt.pt iter` (torch fallback) | {tm['median_s']:.3f} s wall (max {tm['max_s']:.3f}) | `{tm['out']}` |",
        f"| fresh `python -c 'import torch; torch.load(…)'` | {tl['median_s']:.3f} s wall (max {tl['max_s']:.3f}) | prints value, import s, load s: `{tl['out']}` |",
        f"| fresh `python -c pass` | {pp['median_s']:.3f} s wall | |",
        "",
        "## Chains",
        "",
        "| round | counter | ok | runners | handoffs (s) | iterations once | submit → done | load at start → end | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in res["runs"]:
        L.append(
            f"| {r['round']} | {r['kind']} | {r['ok']} | {r.get('runners', '-')} | {', '.join(fmt(h['handoff_s'], 3) for h in r.get('handoffs', []))} | "
            f"{r.get('iterations_once', '-')} | {fmt(r.get('submit_to_done_s'), 1)} s | {r['loadavg_start'][0]} → {(r.get('loadavg_end') or ['-'])[0]} | {'; '.join(r['notes'])} |"
        )
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rounds", type=int, default=4, help="rounds of one torch and one file chain (default %(default)s)"
    )
    ap.add_argument(
        "--mode", choices=("submitter", "relay"), default="submitter", help="chain's mode (default %(default)s)"
    )
    ap.add_argument("--ckpt-mb", type=float, default=8.0, help="the model state's size in MB (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=5, help="fresh interpreters per reader timing (default %(default)s)")
    ap.add_argument("--note", default="", help="a remark for the results file (what else ran on the machine)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds to wait for a round (default %(default)s)")
    ap.add_argument("--work", default=str(BENCH / ".work"), help="scratch directory (default %(default)s)")
    ap.add_argument("--out", default=str(BENCH / "results"), help="results directory (default %(default)s)")
    ap.add_argument("--stem", help="results file name without .json/.md (default counter-handoff-<date>)")
    args = ap.parse_args()

    base = Path(args.work) / time.strftime("%Y-%m-%dT%H%M%S")
    base.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "note": args.note,
        "git": git_commit(),
        "machine": {"nproc": os.cpu_count(), "debian_version": Path("/etc/debian_version").read_text().strip()},
        "setup": {"mode": args.mode, "rounds": args.rounds, "ckpt_mb": args.ckpt_mb, "max_iter": MAX_ITER},
        "work": str(base),
        "loadavg_start": loadavg(),
        "runs": [],
    }
    files = chain_files()
    res["chain_changed_during"] = {}
    for rnd in range(1, args.rounds + 1):
        order = KINDS if rnd % 2 else KINDS[::-1]
        pair = []
        for n, kind in enumerate(order):
            if n:
                time.sleep(STAGGER)
            d, env = workspace(base, f"{kind}-{rnd}", kind, args.ckpt_mb)
            pair.append(submit(d, env, kind, args.mode) | {"round": rnd})
        wait_all(pair, args.timeout)
        for r in pair:
            if r["ok"]:
                measure(r)
        res["runs"] += pair
        now = chain_files()
        if changed(files, now):  # someone edited chain/ meanwhile: both chains of the round ran it alike
            res["chain_changed_during"][f"round {rnd}"] = changed(files, now)
            log(f"chain/ changed during round {rnd}: {', '.join(changed(files, now))}")
        files = now
    res["loadavg_end"] = loadavg()
    res["git_after"] = git_commit()
    last_torch = next(r for r in reversed(res["runs"]) if r["kind"] == "torch" and (r["ok"] or r is res["runs"][0]))
    last_file = next((r for r in reversed(res["runs"]) if r["kind"] == "file"), None)
    res["reader"] = reader_alone(
        Path(last_torch["dir"]) / "ckpt.pt",
        Path(last_file["dir"]) / "state_iter.txt" if last_file else None,
        args.repeat,
    )
    res["summary"] = {k: kind_summary(res["runs"], k) for k in KINDS}
    t, f = res["summary"]["torch"], res["summary"]["file"]
    res["summary"]["difference"] = {
        k: round(t[k] - f[k], 3) if t[k] is not None and f[k] is not None else None
        for k in ("median_s", "max_s", "mean_s")
    }
    res["ended_at"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    write_results(Path(args.out), args.stem or f"counter-handoff-{res['date']}", res, render(res))
    return 0 if all(r["ok"] for r in res["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
