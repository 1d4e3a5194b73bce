"""Telling people the chain has ended: the ``--notify`` commands and one
Slurm mail (``--mail-user``), once per end of the chain.

At most once: the end is marked announced in ``state.json`` before anything
runs, so a restarted submitter, a second ``chain status`` or a resume never
announces the same end twice (a resumed chain that ends again is a new end).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from chain.backends.base import Backend
from chain.core.events import Announced
from chain.core.model import ChainState
from chain.core.names import MAIL_SCRIPT
from chain.core.settings import Settings
from chain.effects.appenv import app_environ, app_umask
from chain.effects.executor import Executor
from chain.errors import ChainError
from chain.store import ChainDir, ChainStatus

NOTIFY_TIMEOUT = 60.0  # seconds one notify command may take


def announce_end(
    run: Executor,
    status: ChainStatus,
    settings: Settings,
    workdir: Path,
    *,
    final: tuple[ChainState, str] | None = None,
    timeout: float = NOTIFY_TIMEOUT,
) -> None:
    """Run the notify commands and submit the mail job for an ended chain,
    unless this end was announced already. Failures are logged, never raised.

    ``final`` is the end about to be saved: the ending code announces before
    it saves the ended state, so whoever waits for the end (``chain status
    --wait``, ``Chain.wait``) sees it with the announcement made. ``run``:
    the executor of the job or command that ends the chain."""
    state, reason = final or (status.state, status.reason)
    if not state.ended or status.end_announced or not (settings.notify or settings.mail_user):
        return
    run.apply(status, Announced())
    chain = run.chain
    env = app_environ(os.environ, venv_on_path=settings.venv_on_path)
    env.update(
        CHAIN_ID=status.chain_id,
        CHAIN_STATE=state.value,
        CHAIN_REASON=reason,
        CHAIN_DIR=str(chain.root),
        CHAIN_ITERATION=str(status.iteration),
        MAX_ITER=str(settings.max_iter),
    )
    for i, cmd in enumerate(settings.notify, start=1):
        _run(chain, f"notify-{i}", cmd, env, workdir, timeout)
    if settings.mail_user:
        _mail(chain, run.backend, status, settings, state, workdir)


def _run(chain: ChainDir, name: str, cmd: str, env: dict[str, str], workdir: Path, timeout: float) -> None:
    log_path = chain.slurm_logs / f"{name}.log"
    try:
        with chain.open_output(f"{name}.log") as log:
            rc = subprocess.run(
                ["bash", "-c", cmd],
                cwd=workdir if workdir.is_dir() else None,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=timeout,
                check=False,
                umask=app_umask(os.environ),
            ).returncode
        verdict = "ok" if rc == 0 else f"FAILED (exit {rc}, see {log_path})"
    except subprocess.TimeoutExpired:
        verdict = f"FAILED (timed out after {timeout:.0f}s, see {log_path})"
    except OSError as exc:
        verdict = f"FAILED ({exc.strerror or exc})"
    chain.log(f"{name}: {verdict}", echo=False)


def _mail(
    chain: ChainDir, backend: Backend, status: ChainStatus, settings: Settings, state: ChainState, workdir: Path
) -> None:
    """One short job with ``--mail-type=END``: Slurm mails its end, and its
    name (``<chain id>.<state>``) says how the chain ended."""
    if backend.name == "local":
        chain.log(
            f"mail: the {backend.name} backend sends no mail (--mail-user {settings.mail_user})",
            echo=False,
        )
        return
    name = f"{status.chain_id}.{state.value}"
    try:
        job_id = backend.submit(
            chain.script(MAIL_SCRIPT), job_name=name, cwd=workdir if workdir.is_dir() else chain.root
        )
    except ChainError as exc:
        chain.log(f"mail: could not submit the mail job: {exc}", echo=False)
        return
    chain.log(f"mail: job {job_id} ({name}) mails {settings.mail_user} the chain's end", echo=False)
