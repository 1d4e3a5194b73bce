"""Completion hooks: built-in analytics, the seed's scripts, user commands.

Each runs once per chain (a record per hook in state.json survives submitter
restarts); a failing hook is logged and reported, never fatal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from chain.core.model import ChainState
from chain.core.settings import Settings
from chain.effects.appenv import app_environ, app_umask
from chain.primitives.codes import HOOK_CANNOT_START, HOOK_TIMED_OUT
from chain.store import ChainDir, ChainStatus

# The seed's convention: these scripts in the working directory run if present.
SEED_SCRIPTS = ("aggregate_usage.py", "plot_progress.py")


@dataclass(frozen=True)
class Hook:
    name: str
    argv: list[str]


def plan_hooks(settings: Settings, python: str = sys.executable, *, job_report: bool = False) -> list[Hook]:
    """The hooks in their order. ``job_report``: the report as a relay runner
    makes it in its own slot (``chain.reporting.report.job_report``: no
    plot, no wait for final records), not ``chain report``."""
    report = [python, "-m", "chain.reporting.report"] if job_report else [python, "-m", "chain", "report", "--quiet"]
    hooks = [Hook("report", report)]
    for script in SEED_SCRIPTS:
        hooks.append(Hook(script, [python, script]))
    for i, cmd in enumerate(settings.hooks, start=1):
        hooks.append(Hook(f"hook-{i}", ["bash", "-c", cmd]))
    return hooks


def run_hooks(
    chain: ChainDir,
    status: ChainStatus,
    settings: Settings,
    workdir: Path,
    *,
    record: Callable[[dict[str, Any]], None],
    timeout: float = 3600.0,
    only: tuple[str, ...] | None = None,
    final: tuple[ChainState, str] | None = None,
    job_report: bool = False,
) -> None:
    """Run every hook not yet run (or only those named); ``record`` each
    result (the executor keeps it in ``status.hooks`` and saves it), so a
    restarted submitter never runs one twice.
    ``timeout`` is the time all of them have together (the job's remaining
    time): each gets what the earlier ones left.

    Each hook gets ``CHAIN_STATE`` and ``CHAIN_REASON``: the chain's final
    state (``final``, when the state is saved only after the hooks), else
    its current one. ``job_report``: see ``plan_hooks``."""
    state, reason = final or (status.state, status.reason)
    done = {h.get("name") for h in status.hooks}
    budget_end = time.monotonic() + timeout  # ``timeout`` bounds all the hooks together
    for hook in plan_hooks(settings, job_report=job_report):
        if hook.name in done or (only is not None and hook.name not in only):
            continue
        if hook.name in SEED_SCRIPTS and not (workdir / hook.name).is_file():
            chain.log(f"hook {hook.name}: not found in {workdir}; skipped")
            record({"name": hook.name, "skipped": True, "rc": None})
            continue
        argv = list(hook.argv)
        if hook.name == "report":
            argv += ["--chain-dir", str(chain.root)]
        log_path = chain.slurm_logs / f"hook-{hook.name}.log"
        started = time.time()
        left = budget_end - time.monotonic()
        chain.log(f"hook {hook.name}: running {' '.join(argv)}")
        entry: dict[str, Any] = {"name": hook.name, "argv": argv, "log": str(log_path), "started": started}
        try:
            with chain.open_output(f"hook-{hook.name}.log") as log:
                env = app_environ(os.environ, venv_on_path=settings.venv_on_path)
                env.update(
                    CHAIN_DIR=str(chain.root), CHAIN_ID=status.chain_id, CHAIN_STATE=state.value, CHAIN_REASON=reason
                )
                entry["rc"] = _run_bounded(argv, workdir, log, env, max(1.0, left))
            if entry["rc"] == HOOK_TIMED_OUT:
                entry["error"] = f"timed out after {max(1.0, left):.0f}s (the time the job had left)"
        except OSError as exc:
            entry["rc"] = HOOK_CANNOT_START
            entry["error"] = exc.strerror or str(exc)
        entry["ended"] = time.time()
        verdict = "ok" if entry["rc"] == 0 else f"FAILED (exit {entry['rc']}, see {log_path})"
        chain.log(f"hook {hook.name}: {verdict}")
        record(entry)


def _run_bounded(argv: list[str], workdir: Path, log: IO[str], env: dict[str, str], timeout: float) -> int:
    """Run a hook in its own process group; past ``timeout`` the whole group
    gets SIGTERM, then SIGKILL 5 s later (a hook's children included), and the
    result is 124."""
    proc = subprocess.Popen(
        argv,
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        umask=app_umask(os.environ),
    )
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        proc.wait()
        return HOOK_TIMED_OUT
