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
from typing import IO, Any, Protocol

from chain.core.model import ChainState
from chain.core.settings import Settings
from chain.effects.appenv import app_environ, app_umask
from chain.primitives.codes import HOOK_CANNOT_START, HOOK_TIMED_OUT
from chain.primitives.exitwait import readable
from chain.primitives.forking import flush_quietly, fork_main
from chain.store import ChainDir, ChainStatus

# The seed's convention: these scripts in the working directory run if present.
SEED_SCRIPTS = ("aggregate_usage.py", "plot_progress.py")


@dataclass(frozen=True)
class Hook:
    name: str
    argv: list[str]
    # chain's own code behind ``argv`` (``python -m MODULE ARGS``): run in a forked
    # child instead (``_Forked``), given ARGS; None: argv is executed
    main: Callable[[list[str]], int] | None = None


def _job_report(args: list[str]) -> int:
    from chain.reporting.report import job_report

    return job_report(args)


def plan_hooks(settings: Settings, python: str = sys.executable, *, job_report: bool = False) -> list[Hook]:
    """The hooks in their order. ``job_report``: the report as a relay runner
    makes it in its own slot (``chain.reporting.report.job_report``: no
    plot, no wait for final records), not ``chain report``."""
    report = [python, "-m", "chain.reporting.report"] if job_report else [python, "-m", "chain", "report", "--quiet"]
    hooks = [Hook("report", report, _job_report if job_report else None)]
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
                entry["rc"] = _run_bounded(argv, workdir, log, env, max(1.0, left), main=hook.main)
            if entry["rc"] == HOOK_TIMED_OUT:
                entry["error"] = f"timed out after {max(1.0, left):.0f}s (the time the job had left)"
        except OSError as exc:
            entry["rc"] = HOOK_CANNOT_START
            entry["error"] = exc.strerror or str(exc)
        entry["ended"] = time.time()
        verdict = "ok" if entry["rc"] == 0 else f"FAILED (exit {entry['rc']}, see {log_path})"
        chain.log(f"hook {hook.name}: {verdict}")
        record(entry)


class _Waitable(Protocol):
    pid: int

    def wait(self, timeout: float | None = None) -> int: ...


def _run_bounded(
    argv: list[str],
    workdir: Path,
    log: IO[str],
    env: dict[str, str],
    timeout: float,
    *,
    main: Callable[[list[str]], int] | None = None,
) -> int:
    """Run a hook in its own process group; past ``timeout`` the whole group
    gets SIGTERM, then SIGKILL 5 s later (a hook's children included), and the
    result is 124. ``main``: see ``Hook``."""
    proc: _Waitable | None = None
    if main is not None:
        proc = _Forked.start(main, argv[3:], workdir, log, env)
    if proc is None:
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


class _Forked:
    """A hook that is chain's own Python code, run in a forked child
    (``fork_main``) on the terms of an executed hook; ``wait`` as Popen's:
    its exit code, or -signal."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid, self._pidfd = pid, pidfd
        self._code: int | None = None

    @classmethod
    def start(
        cls, main: Callable[[list[str]], int], args: list[str], workdir: Path, log: IO[str], env: dict[str, str]
    ) -> _Forked | None:
        """The started child; None where it cannot start (``fork_main``) or
        its end cannot be waited for with a timeout (no pidfd): the caller
        executes the hook's argv then."""
        if not hasattr(os, "pidfd_open"):
            return None
        flush_quietly(log)
        out = log.fileno()
        pid = fork_main(main, args, stdout=out, stderr=out, cwd=workdir, env=env, umask=app_umask(os.environ))
        if pid is None:
            return None
        try:
            return cls(pid, os.pidfd_open(pid))
        except OSError:  # an old kernel: no bounded wait for it; it is killed and argv executed
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self._code is None:
            if timeout is not None and not readable(self._pidfd, timeout):
                raise subprocess.TimeoutExpired(f"hook in process {self.pid}", timeout)
            self._code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            os.close(self._pidfd)
        return self._code
