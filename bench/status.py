#!/usr/bin/env python3
"""``chain status`` on 10 000 runners, and ``chain --help`` start-up.

Builds a synthetic chain directory with chain's own classes, then times the
``chain`` entry point (wall time, median of N runs after a warm-up) as a user
runs it, into a pipe (the plain view, no rich) and on a pseudo-terminal (the
rich view a person sees): from a wheel of this checkout installed into a scratch venv with its
dependencies from the package index (pip compiles the bytecode at install,
as for any pip-installed tool).  The
development install (editable, as `scripts/setup` makes it) is timed too,
with the environment as it is: where ``PYTHONDONTWRITEBYTECODE`` is set,
every start recompiles chain's modules.  In-process figures show where the
time goes.  Needs no cluster (the chain is ``completed``: no scheduler query).

    python3 bench/status.py                # prints the table
Called by bench/handoff.py (bench/run) for the combined results file.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TARGET_S = 0.25  # the status target: a quarter second on 10 000 runners
sys.path.insert(0, str(ROOT))


def build_chain_dir(work: Path, n_runners: int) -> Path:
    """A completed chain of ``n_runners`` 30 s runners, as chain writes it."""
    from chain import api
    from chain.core.model import ChainState
    from chain.store import ChainDir, ChainStatus, JudgedRunner, write_json

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    max_iter = n_runners * 20
    (work / "state_iter.txt").write_text(f"{max_iter}\n")
    settings = api.load_settings(
        {"app_cmd": "python3 app.py", "max_iter": str(max_iter), "backend": "slurm"}, {}, None, work
    )
    chain = ChainDir(work / ".chain")
    chain.create()
    write_json(chain.settings_file, settings.to_json())
    t0 = 1_700_000_000.0
    lines = []
    for i in range(1, n_runners + 1):
        start = t0 + (i - 1) * 32
        entry = {
            "job_id": str(100000 + i),
            "seq": i,
            "state": "COMPLETED",
            "exit_code": 124 if i < n_runners else 0,
            "iter_before": (i - 1) * 20,
            "iter_after": i * 20,
            "verdict": "continue" if i < n_runners else "complete",
            "reason": "checkpoint advanced",
            "submitted": start - 1.5,
            "start": start,
            "end": start + 30,
            "stop_to_exit": 0.8,
            "recorded": True,
        }
        lines.append(json.dumps(entry, sort_keys=True) + "\n")  # ChainDir.append_runner's format
    # append_runner fsyncs each line: the bulk goes in one write, the last
    # runner through chain's own append_runner
    chain.runners_log.write_text("".join(lines[:-1]))
    chain.append_runner(JudgedRunner(**json.loads(lines[-1])))
    chain.worker_ids.write_text("".join(f"{100000 + i}\n" for i in range(1, n_runners + 1)))
    for i in range(n_runners - 4, n_runners + 1):
        job, start = str(100000 + i), t0 + (i - 1) * 32
        write_json(
            chain.record_file(job),
            {
                "job_id": job,
                "job_name": f"chain-bench.r{i}",
                "seq": i,
                "status": "ended",
                "start": start,
                "host": "vm",
                "end_planned": start + 30,
                "stop_at": start + 20,
                "kill_at": start + 25,
                "slurm_end": start + 60,
                "iter_before": (i - 1) * 20,
                "iter_after": i * 20,
                "exit_code": 124,
                "app_exit_code": 99,
                "end": start + 21,
                "stop_sent": start + 20,
                "stop_to_exit": 0.8,
                "external_signal": None,
                "killed": False,
                "detail": "app exited 99 after SIGTERM",
            },
        )
    chain.save_status(
        ChainStatus(
            chain_id="chain-bench10k",
            state=ChainState.COMPLETED,
            created=t0,
            workdir=str(work),
            backend="slurm",
            submitter_cycle=400,
            submitter_job_id="99999",
            runner_seq=n_runners,
            runner_job_id=str(100000 + n_runners),
            runner_live=False,
            iteration=max_iter,
            completed_at=t0 + n_runners * 32,
            reason=f"reached MAX_ITER={max_iter}",
        )
    )
    chain.log("synthetic chain for the status benchmark", echo=False)
    return chain.root


def clean_source(work: Path) -> Path:
    """This checkout as it is (tracked files with their uncommitted changes,
    and new files git does not ignore), copied without what git ignores: a
    stale ``build/`` from an earlier layout would otherwise go into the wheel
    (setuptools builds in ./build/lib and never removes a module that no
    longer exists, e.g. an old ``chain/api.py`` beside the ``chain/api/``
    package, which breaks ``import chain.api``)."""
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        return ROOT  # not a git checkout: build it as it is
    for rel in filter(None, listed.stdout.decode().split("\0")):
        path = ROOT / rel
        if path.is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / rel)
    return src


def user_install(venv: Path) -> tuple[Path, str]:
    """A wheel of this checkout in a scratch venv: the ``chain`` a user runs.

    An isolated venv with the dependencies from the package index, as
    ``pip install slurm-chain`` makes it; if the index cannot be reached, a
    venv that sees this interpreter's site-packages (and its .pth files)."""
    wheels = venv.parent / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run(
        [PY, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(clean_source(venv.parent))],
        check=True,
        capture_output=True,
    )
    wheel = [str(w) for w in wheels.glob("*.whl")]
    for how, venv_args, pip_args in (
        ("isolated venv, dependencies from the index", [], []),
        ("venv with this interpreter's site-packages", ["--system-site-packages"], ["--no-deps"]),
    ):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([PY, "-m", "venv", *venv_args, str(venv)], check=True)
        pip = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", *pip_args, *wheel], capture_output=True, text=True, check=False
        )
        if pip.returncode == 0:
            return venv / "bin" / "chain", how
    raise RuntimeError(f"cannot install the wheel: {pip.stderr.strip()[-300:]}")


def timed(argv: list[str], cwd: Path, env: dict[str, str], repeats: int) -> dict[str, Any]:
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)  # warm-up
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        ts.append(time.perf_counter() - t)
        if p.returncode != 0:
            return {"argv": " ".join(argv), "error": p.stderr.strip()[-300:]}
    return {"argv": " ".join(argv), "median_s": statistics.median(ts), "min_s": min(ts), "runs_s": ts}


def _run_on_pty(argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    """``argv`` with a pseudo-terminal as stdout, its output read as it
    comes (a full terminal would block it); its exit code."""
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    while select.select([master], [], [], 30)[0]:
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the child closed its terminal
            break
    os.close(master)
    return proc.wait(timeout=60)


def timed_tty(argv: list[str], cwd: Path, env: dict[str, str], repeats: int) -> dict[str, Any]:
    """As ``timed``, on a pseudo-terminal: the view a person sees (rich)."""
    _run_on_pty(argv, cwd, env)  # warm-up
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        code = _run_on_pty(argv, cwd, env)
        ts.append(time.perf_counter() - t)
        if code != 0:
            return {"argv": " ".join(argv) + " (terminal)", "error": f"exit {code}"}
    return {"argv": " ".join(argv) + " (terminal)", "median_s": statistics.median(ts), "min_s": min(ts), "runs_s": ts}


def in_process(fn: Callable[[], object], repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def status_bench(base: Path, n_runners: int = 10_000, repeats: int = 9) -> dict[str, Any]:
    """All the status / start-up figures, as one JSON-able dict."""
    from chain import api

    chain_root = build_chain_dir(base / "status10k", n_runners)
    # the work directory, not the chain: a cwd inside ROOT would import this checkout
    cwd = chain_root.parent
    user_chain, how = user_install(base / "status-venv")
    dev_chain = Path(PY).parent / "chain"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_JOB")}
    env["COLUMNS"] = "120"
    cd = ["--chain-dir", str(chain_root)]
    out: dict[str, Any] = {
        "runners": n_runners,
        "chain_dir": str(chain_root),
        "repeats": repeats,
        "user_install": how,
        "runners_jsonl_bytes": (chain_root / "runners.jsonl").stat().st_size,
        "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
    }
    commands = {
        "status": [str(user_chain), "status", *cd],
        "status_json": [str(user_chain), "status", "--json", *cd],
        "status_json_history10": [str(user_chain), "status", "--json", "--history", "10", *cd],
        "help": [str(user_chain), "--help"],
        "dev_status": [str(dev_chain), "status", *cd] if dev_chain.exists() else [PY, "-m", "chain", "status", *cd],
        "python_bare": [PY, "-c", "pass"],
        "python_no_site": [PY, "-S", "-c", "pass"],
        "python_user_venv": [str(user_chain.parent / "python"), "-c", "pass"],
        "import_chain_cli": [str(user_chain.parent / "python"), "-c", "import chain.cli"],
    }
    out["commands"] = {key: timed(argv, cwd, env, repeats) for key, argv in commands.items()}
    out["commands"]["status_tty"] = timed_tty(commands["status"], cwd, env, repeats)
    out["commands"]["dev_status_tty"] = timed_tty(commands["dev_status"], cwd, env, repeats)
    rep = api.status_report(chain_root)
    out["in_process_s"] = {
        "status_report_all": in_process(lambda: api.status_report(chain_root), repeats),
        "status_report_history10": in_process(lambda: api.status_report(chain_root, history=10), repeats),
        "json_dumps_all": in_process(lambda: json.dumps(rep.to_json(), default=str), repeats),
    }
    return out


LABELS = {
    "status": "`chain status` into a pipe (user install; the plain view)",
    "status_tty": "`chain status` on a terminal (user install; the rich view)",
    "status_json": "`chain status --json` (user install; all runners)",
    "status_json_history10": "`chain status --json --history 10` (user install)",
    "help": "`chain --help` (user install)",
    "dev_status": "`chain status` into a pipe (editable dev install, this environment)",
    "dev_status_tty": "`chain status` on a terminal (editable dev install, this environment)",
    "python_bare": "`python3 -c pass` (this interpreter, with this machine's site-packages .pth files)",
    "python_no_site": "`python3 -S -c pass` (no site-packages)",
    "python_user_venv": "`python -c pass` (the user install's venv)",
    "import_chain_cli": "`python -c 'import chain.cli'` (user install)",
}


def target_rows(st: dict[str, Any]) -> list[str]:
    """Rows for the targets table (``| target | measured | verdict |``)."""
    rows = []
    for key in ("status", "status_tty", "status_json_history10"):
        m = st["commands"][key].get("median_s")
        verdict = "PASS" if m is not None and m <= TARGET_S else "FAIL"
        rows.append(
            f"| {LABELS[key]} ≤ {TARGET_S} s on {st['runners']} runners | "
            f"{'-' if m is None else f'{m:.3f}'} s | {verdict} |"
        )
    return rows


def section(st: dict[str, Any]) -> list[str]:
    """The start-up and status section of the results table."""
    lines = [
        "",
        (f"## chain start-up and status on {st['runners']} runners (wall time, {st['repeats']} runs after a warm-up)"),
        "",
        f"User install: a wheel of this checkout in an {st.get('user_install', '?')}.",
        "",
        "| command | median (s) | min (s) |",
        "|---|---|---|",
    ]
    for key, label in LABELS.items():
        r = st["commands"].get(key)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {label} | error: {r['error']} | |")
        else:
            lines.append(f"| {label} | {r['median_s']:.3f} | {r['min_s']:.3f} |")
    names = {
        "status_report_all": f"`api.status_report()`, all {st['runners']} runners",
        "status_report_history10": "`api.status_report(history=10)` (what `chain status` asks for)",
        "json_dumps_all": "`json.dumps` of the all-runners report",
    }
    lines += [f"| in process: {names[k]} | {v:.3f} | |" for k, v in st["in_process_s"].items()]
    if st.get("pythondontwritebytecode"):
        lines.append("")
        lines.append(
            "PYTHONDONTWRITEBYTECODE is set in this environment: the editable dev install recompiles "
            "chain's modules at every start (the user install has its bytecode from pip)."
        )
    return lines


def main() -> int:
    base = ROOT / "bench" / ".work" / time.strftime("%Y-%m-%dT%H%M%S")
    st = status_bench(base)
    print("\n".join(["| target | measured | verdict |", "|---|---|---|", *target_rows(st), *section(st)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
