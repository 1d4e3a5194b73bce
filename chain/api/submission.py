"""Submitting a chain: new, resumed or renewed; its scripts rendered first."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chain.api.config import (
    LimitsMemo,
    check_app,
    check_command_line,
    check_room,
    load_settings,
    stored_settings,
)
from chain.api.listing import register
from chain.backends import choose_backend, make_backend
from chain.backends.base import Backend
from chain.core.events import Prepared, Resumed
from chain.core.launch import strategy
from chain.core.launchers import torchrun_signal_warning
from chain.core.model import ChainState
from chain.core.names import (
    MAIL_SCRIPT,
    RUNNER_SCRIPT,
    SUBMITTER_SCRIPT,
)
from chain.core.settings import BackendName, Settings
from chain.effects.executor import Executor
from chain.effects.runners import drop_next
from chain.errors import ChainDirError, ConfigError
from chain.modes import driver
from chain.store import (
    ChainDir,
    ChainStatus,
)
from chain.store.counter import counter_source

if TYPE_CHECKING:
    from chain.api.templating import Scripts


def render(settings: Settings, chain_id: str, chain_dir: Path, workdir: Path) -> Scripts:
    from chain.api.templating import render_scripts  # jinja2 only where scripts are made

    return render_scripts(settings, chain_id=chain_id, chain_dir=chain_dir, workdir=workdir)


def render_chain(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    config: Path | None,
    chain_dir: Path,
    cwd: Path,
    notify: Callable[[str], None] | None = None,
) -> Scripts:
    """Both scripts as ``submit`` would write them: for the chain in
    ``chain_dir`` when there is one (its stored settings, id and working
    directory; flags change them as on resume), else for a new chain with a
    placeholder id."""
    chain = ChainDir(chain_dir)
    existing = chain.load_status() if chain.state_file.is_file() else None
    if existing is None:
        settings = load_settings(flags, environ, config, cwd)
        _warn_about_launcher(settings, notify)
        return render(settings, f"{settings.job_name}-xxxxxx", chain_dir, cwd)
    if notify:
        notify(f"rendering the stored settings of chain {existing.chain_id} in {chain_dir}")
    settings = load_settings(flags, environ, config, cwd, stored_settings(chain), notify)
    _warn_about_launcher(settings, notify)
    return render(settings, existing.chain_id, chain_dir, Path(existing.workdir or cwd))


def _warn_about_launcher(settings: Settings, notify: Callable[[str], None] | None) -> None:
    """A stop signal the app's launcher would not pass on, or a launcher the
    job's Python lacks: said, not refused (``chain submit`` refuses the latter)."""
    warning = torchrun_signal_warning(settings.app_cmd, settings.stop_signal) or missing_launcher(settings)
    if warning and notify:
        notify(warning)


def missing_launcher(settings: Settings) -> str | None:
    """One line when ``--launcher``'s package does not import in the jobs'
    Python (this interpreter, which the scripts run), else None. Only the
    top-level package is looked up: nothing of it is imported."""
    package = strategy(settings).package.split(".")[0]
    if not package or importlib.util.find_spec(package) is not None:
        return None
    return (
        f"--launcher {settings.launcher.value} needs the {package} package in the jobs' Python "
        f"({sys.executable}), which does not have it: install it there, or run chain from the environment that has it"
    )


@dataclass(frozen=True)
class Submitted:
    chain_id: str
    job_id: str
    backend: str
    why: str
    chain_dir: Path
    job_kind: str = "submitter"  # what job_id is: the submitter, or (relay mode) a runner


def submit(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    config: Path | None,
    chain_dir: Path,
    workdir: Path,
    resume: bool = False,
    new: bool = False,
    notify: Callable[[str], None] | None = None,
    backend: Backend | None = None,
    reset_excluded: bool = False,
    limits: LimitsMemo | None = None,
) -> Submitted:
    """Start a new chain in ``chain_dir``, or resume a stopped one.

    ``resume`` keeps the chain's stored settings, changed only by ``flags``.
    ``new`` starts a new chain where an ended one is, keeping the old chain
    directory under another name. ``notify`` receives lines for a person
    (settings not applied on resume, a wait for the previous submitter).
    ``backend`` replaces the one the settings choose (tests, embedding).
    ``reset_excluded`` (with ``resume``): the nodes the chain excluded are used again.
    ``limits``: the site's job limits asked once for a batch (a sweep).
    """
    if reset_excluded and not resume:
        raise ConfigError("--reset-excluded goes with --resume")
    chain = ChainDir(chain_dir)
    if chain_dir.exists() and not chain_dir.is_dir():
        raise ChainDirError(f"chain directory {chain_dir} is not a directory")
    with chain.locked():  # two commands at once: one chain, one submitter
        return _submit(
            chain,
            flags,
            environ,
            config=config,
            workdir=workdir,
            resume=resume,
            new=new,
            notify=notify,
            backend=backend,
            reset_excluded=reset_excluded,
            limits=limits,
        )


def _submit(
    chain: ChainDir,
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    config: Path | None,
    workdir: Path,
    resume: bool,
    new: bool,
    notify: Callable[[str], None] | None,
    backend: Backend | None,
    reset_excluded: bool = False,
    limits: LimitsMemo | None = None,
) -> Submitted:
    chain_dir = chain.root
    existing = chain.load_status() if chain.state_file.exists() else None
    settings = _checked_settings(
        chain, existing, flags, environ, config=config, workdir=workdir, resume=resume, new=new, notify=notify
    )
    # on resume, settings.backend is the stored (resolved) one unless a flag changed it; chosen
    # before --new moves the ended chain aside, so a refused backend leaves that chain where it was
    name, why = (backend.name, "given by the caller") if backend else choose_backend(settings.backend.value)
    if backend is None:
        backend = make_backend(name, chain_dir)  # a path only: the local backend's spool is made when used
    check_room(settings, backend, notify, limits)
    if new and existing is not None:
        kept = archive_chain_dir(chain_dir, existing)
        if notify:
            notify(f"kept the {existing.state.value} chain {existing.chain_id} as {kept}")
        existing = None
    mode = driver(settings.mode)
    if resume and existing is not None:
        mode.refuse_resume(backend, existing, notify)
    chain_id = existing.chain_id if existing else f"{settings.job_name}-{os.urandom(3).hex()}"
    stored = dataclasses.replace(settings, backend=BackendName(name))
    _write_chain_files(chain, stored, chain_id, workdir)
    run = Executor(chain, backend)  # the command's one executor: every event of this submit goes through it
    status = (
        _resumed_status(run, existing, reset_excluded)
        if existing
        else ChainStatus(chain_id=chain_id, created=time.time())
    )
    run.apply(status, Prepared(name, str(workdir)))
    job_id, what = mode.start(run, status, stored, workdir), mode.job_kind
    chain.log(
        f"{'resumed' if resume else 'submitted'} chain {chain_id}: {what} job {job_id} on {name} ({why})", echo=False
    )
    if not resume:
        register(chain_dir, os.environ)  # for `chain list` without arguments
    return Submitted(chain_id, job_id, name, why, chain_dir, what)


def _checked_settings(
    chain: ChainDir,
    existing: ChainStatus | None,
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    config: Path | None,
    workdir: Path,
    resume: bool,
    new: bool,
    notify: Callable[[str], None] | None,
) -> Settings:
    """This submit's settings, once every refusal rule has passed: the
    command line (flags, config file) first, then what the chain directory
    holds, then the app and its counter. A bad flag beside an active chain
    is the flag's error; the lines for settings not applied on resume come
    before a refusal (they may be why the resume is refused)."""
    if resume and new:
        raise ConfigError("--resume and --new exclude each other")
    if resume and existing is None:  # nothing to resume: still, the command line's own errors first
        check_command_line(flags, config)
        settings = None
    else:
        settings = load_settings(flags, environ, config, workdir, stored_settings(chain) if resume else None, notify)
    _check_submit_allowed(chain.root, existing, flags, resume=resume, new=new, cancelling=chain.cancel_requested())
    assert settings is not None  # resuming nothing was refused just above
    missing = missing_launcher(settings)
    if missing:
        raise ConfigError(missing)
    counter = check_app(settings, workdir)
    _warn_about_launcher(settings, notify)
    if not resume:
        _check_something_to_run(settings, workdir, counter)
    return settings


def _write_chain_files(chain: ChainDir, settings: Settings, chain_id: str, workdir: Path) -> None:
    """Both scripts and the settings; everything (templates included) is
    rendered before anything is written."""
    scripts = render(settings, chain_id, chain.root, workdir)
    chain.create()
    chain.write_script(SUBMITTER_SCRIPT, scripts.submitter)
    chain.write_script(RUNNER_SCRIPT, scripts.runner)
    if scripts.mail:
        chain.write_script(MAIL_SCRIPT, scripts.mail)
    else:
        chain.remove_script(MAIL_SCRIPT)
    chain.write_settings(settings.to_json())


def _resumed_status(run: Executor, status: ChainStatus, reset_excluded: bool = False) -> ChainStatus:
    """A resumed chain's status: the next submitter cycle, pending, with the
    failure counters reset (and the nodes' strikes, with ``reset_excluded``)."""
    run.apply(status, Resumed(reset_excluded))
    if not status.runner_live:
        # a pre-queued runner of the previous run (its submitter died
        # before dropping it) must not run beside the new runners
        drop_next(run, status, echo=False)
    run.chain.clear_cancel()
    return status


def _check_submit_allowed(
    chain_dir: Path,
    existing: ChainStatus | None,
    flags: Mapping[str, Any],
    *,
    resume: bool,
    new: bool,
    cancelling: bool,
) -> None:
    """The refusal rules of ``submit``: what the chain directory holds against
    what was asked (a one-line ChainDirError saying what to do instead).
    ``cancelling``: a ``chain cancel`` has begun (its mark is there) and not
    yet marked the chain cancelled."""
    if existing is None:
        if resume:
            raise ChainDirError(f"nothing to resume: {chain_dir} holds no chain")
        return
    if not existing.state.ended:
        if resume and cancelling:
            # cancel releases the lock while its jobs end: a resume between
            # would queue a driver that the cancel then marks cancelled
            raise ChainDirError(
                f"chain {existing.chain_id} is being cancelled: resume it once chain cancel has "
                "ended (if that cancel was interrupted, run chain cancel again)"
            )
        if resume:
            return  # the live-submitter check follows, with the backend
        raise ChainDirError(
            f"{chain_dir} holds an active chain {existing.chain_id} ({existing.state.value}); "
            "see chain status, or chain cancel"
        )
    if new:
        return
    if existing.state is ChainState.COMPLETED and (not resume or flags.get("max_iter") is None):
        raise ChainDirError(
            f"{chain_dir} holds the completed chain {existing.chain_id}: extend it with "
            "chain submit --resume --max-iter N, or start a new chain with chain submit --new "
            "(keeps the old one; the app's checkpoint counter must start afresh) or --chain-dir DIR"
        )
    if not resume:
        raise ChainDirError(
            f"{chain_dir} holds a {existing.state.value} chain {existing.chain_id}; continue it "
            "with chain submit --resume, or start a new chain with chain submit --new "
            "or --chain-dir DIR"
        )


def _check_something_to_run(settings: Settings, workdir: Path, counter: int) -> None:
    """A new chain whose counter is already at MAX_ITER would complete at
    once without running the app: refused, saying how to go on (the counter
    of an earlier computation left behind, most likely)."""
    if counter >= settings.max_iter:
        source = (
            f"checkpoint counter {workdir / settings.ckpt_path}"
            if not settings.counter_cmd
            else f"the app's checkpoint ({counter_source(settings)})"
        )
        raise ConfigError(
            f"{source} already holds {counter}, and --max-iter is "
            f"{settings.max_iter}: a new chain would have nothing to run; raise --max-iter, or "
            "remove the counter to start afresh"
        )


def archive_chain_dir(chain_dir: Path, status: ChainStatus) -> Path:
    """Move an ended chain's directory aside (``<dir>.<chain id>``, numbered if taken)."""
    target = chain_dir.with_name(f"{chain_dir.name}.{status.chain_id}")
    n = 1
    while target.exists():
        n += 1
        target = chain_dir.with_name(f"{chain_dir.name}.{status.chain_id}.{n}")
    try:
        chain_dir.rename(target)
    except OSError as exc:
        raise ChainDirError(f"cannot move {chain_dir} aside to {target}: {exc.strerror}") from None
    return target
