"""Library calls behind the CLI: submit, resume, render, status, cancel.

The CLI only adapts these; every user error is a ChainError.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from chain.core import settings as settings_mod
from chain.backends import choose_backend, make_backend
from chain.backends.base import Backend, JobInfo, JobState
from chain.core.model import ChainState
from chain.errors import ChainDirError, CheckpointError, ConfigError, SchedulerError
from chain.core.names import RUNNER_SCRIPT, SUBMITTER_SCRIPT, submitter_job_name
from chain.core.settings import Settings
from chain.store.state import (
    ChainDir, ChainStatus, read_counter, read_json, runner_entry, tail_lines, write_json_atomic,
)

if TYPE_CHECKING:
    from chain.jobs.render import Scripts


def chain_dir_path(value: str | os.PathLike[str] | None, cwd: Path) -> Path:
    raw = str(value) if value else os.environ.get("CHAIN_DIR", ".chain")
    if not raw.strip() or "\n" in raw or "\0" in raw:
        raise ConfigError(f"--chain-dir {raw!r} is not a usable path")
    path = Path(raw).expanduser()
    return (path if path.is_absolute() else cwd / path).resolve()


def load_settings(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    config: Path | None,
    cwd: Path,
    stored: Settings | None = None,
    notify: Callable[[str], None] | None = None,
) -> Settings:
    """Resolve settings: flag > environment > file > default.

    For an existing chain (``stored``: its settings) only flags change the
    stored values; each environment variable or file key that differs is
    reported through ``notify`` and not applied (README: resume rule).
    """
    file_values: dict[str, Any] = {}
    label = "config file"
    if config is not None:
        file_values = settings_mod.read_config_file(config)
        label = str(config)
    elif (cwd / settings_mod.CONFIG_FILE_NAME).is_file():
        path = cwd / settings_mod.CONFIG_FILE_NAME
        file_values = settings_mod.read_config_file(path)
        label = str(path)
    if stored is None:
        return settings_mod.resolve(flags, environ, file_values, file_label=label)
    for line in settings_mod.unapplied(flags, environ, file_values, stored, file_label=label):
        if notify:
            notify(line)
    return settings_mod.resolve(flags, {}, {}, stored)


def stored_settings(chain: ChainDir) -> Settings:
    try:
        data = read_json(chain.settings_file, "settings file")
    except FileNotFoundError:
        raise ChainDirError(f"{chain.root} holds no chain settings (settings.json missing)") from None
    try:
        return settings_mod.from_json(data)
    except ConfigError as exc:
        raise ChainDirError(f"{chain.settings_file} is invalid: {exc}") from None


def check_app(settings: Settings, workdir: Path) -> None:
    """The app's program must exist (unless modules will provide it)."""
    try:
        words = shlex.split(settings.app_cmd)
    except ValueError as exc:
        raise ConfigError(f"--app-cmd {settings.app_cmd!r}: {exc}") from None
    if not words:
        raise ConfigError("no app command: set --app-cmd, APP_CMD or app_cmd in chain.toml")
    program = words[0]
    if "=" in program and not program.startswith(("/", ".")):
        return  # VAR=value cmd ...: leave it to the shell
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else workdir / program
        if not path.exists():
            raise ConfigError(f"app {program!r} does not exist")
        if not os.access(path, os.X_OK):
            raise ConfigError(f"app {program!r} is not executable")
        return
    if settings.module_list or shutil.which(program):
        return
    kind = subprocess.run(["bash", "-c", 'type -t -- "$1"', "_", program],
                          capture_output=True, text=True, check=False).stdout.strip()
    if kind not in ("builtin", "keyword", "function"):
        raise ConfigError(f"app command {program!r} not found on PATH")


def render(settings: Settings, chain_id: str, chain_dir: Path, workdir: Path) -> Scripts:
    from chain.jobs.render import render_scripts  # jinja2 only where scripts are made

    return render_scripts(settings, chain_id=chain_id, chain_dir=chain_dir, workdir=workdir)


def render_chain(flags: Mapping[str, Any], environ: Mapping[str, str], *, config: Path | None, chain_dir: Path,
                 cwd: Path, notify: Callable[[str], None] | None = None) -> Scripts:
    """Both scripts as ``submit`` would write them: for the chain in
    ``chain_dir`` when there is one (its stored settings, id and working
    directory; flags change them as on resume), else for a new chain with a
    placeholder id."""
    chain = ChainDir(chain_dir)
    existing = chain.load_status() if chain.state_file.is_file() else None
    if existing is None:
        settings = load_settings(flags, environ, config, cwd)
        return render(settings, f"{settings.job_name}-xxxxxx", chain_dir, cwd)
    if notify:
        notify(f"rendering the stored settings of chain {existing.chain_id} in {chain_dir}")
    settings = load_settings(flags, environ, config, cwd, stored_settings(chain), notify)
    return render(settings, existing.chain_id, chain_dir, Path(existing.workdir or cwd))


@dataclass(frozen=True)
class Submitted:
    chain_id: str
    job_id: str
    backend: str
    why: str
    chain_dir: Path


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
) -> Submitted:
    """Start a new chain in ``chain_dir``, or resume a stopped one.

    ``resume`` keeps the chain's stored settings, changed only by ``flags``.
    ``new`` starts a new chain where an ended one is, keeping the old chain
    directory under another name. ``notify`` receives lines for a person
    (settings not applied on resume, a wait for the previous submitter).
    """
    chain = ChainDir(chain_dir)
    if chain_dir.exists() and not chain_dir.is_dir():
        raise ChainDirError(f"chain directory {chain_dir} is not a directory")
    existing = chain.load_status() if chain.state_file.exists() else None
    _check_submit_allowed(chain_dir, existing, flags, resume=resume, new=new)
    if new and existing is not None:
        kept = archive_chain_dir(chain_dir, existing)
        if notify:
            notify(f"kept the {existing.state.value} chain {existing.chain_id} as {kept}")
        existing = None
    base = stored_settings(chain) if resume else None
    settings = load_settings(flags, environ, config, workdir, base, notify)
    check_app(settings, workdir)
    # on resume, settings.backend is the stored (resolved) one unless a flag changed it
    name, why = choose_backend(settings.backend.value, chain_dir)
    backend = make_backend(name, chain_dir)
    if resume and existing is not None:
        _refuse_live_submitter(backend, existing, wait=FINISHING_WAIT, notify=notify)
    chain_id = existing.chain_id if existing else f"{settings.job_name}-{os.urandom(3).hex()}"
    # Validate everything (templates included) before anything is written.
    stored = dataclasses.replace(settings, backend=settings_mod.BackendName(name))
    scripts = render(stored, chain_id, chain_dir, workdir)
    chain.create()
    _write_script(chain.scripts / SUBMITTER_SCRIPT, scripts.submitter)
    _write_script(chain.scripts / RUNNER_SCRIPT, scripts.runner)
    write_json_atomic(chain.settings_file, stored.to_json())
    if existing is not None:
        was_ended = existing.state.ended  # status aliases existing: read before the changes
        status = existing
        status.submitter_cycle += 1
        status.state = ChainState.PENDING
        status.reason = ""
        status.no_progress = 0
        status.retries_used = 0
        if was_ended:  # hooks of a crashed submitter still count as run
            status.hooks = []
        if not status.runner_live:
            # a pre-queued runner of the previous run (its submitter died
            # before dropping it) must not run beside the new runners
            from chain.jobs.submitter import drop_next

            drop_next(chain, backend, status, echo=False)
        chain.cancel_file.unlink(missing_ok=True)
    else:
        status = ChainStatus(chain_id=chain_id, created=time.time(), workdir=str(workdir), backend=name)
    status.backend = name
    status.workdir = str(workdir)
    chain.save_status(status)
    _presubmit_first_runner(chain, status, stored, backend, workdir)
    job_id = backend.submit(chain.scripts / SUBMITTER_SCRIPT,
                            job_name=submitter_job_name(chain_id, status.submitter_cycle), cwd=workdir)
    status.submitter_job_id = job_id
    chain.save_status(status)
    chain.add_submitter_id(job_id)
    chain.log(f"{'resumed' if resume else 'submitted'} chain {chain_id}: submitter job {job_id} "
              f"on {name} ({why})", echo=False)
    return Submitted(chain_id, job_id, name, why, chain_dir)


def _check_submit_allowed(chain_dir: Path, existing: ChainStatus | None, flags: Mapping[str, Any], *,
                          resume: bool, new: bool) -> None:
    """The refusal rules of ``submit``: what the chain directory holds against
    what was asked (a one-line ChainDirError saying what to do instead)."""
    if resume and new:
        raise ConfigError("--resume and --new exclude each other")
    if existing is None:
        if resume:
            raise ChainDirError(f"nothing to resume: {chain_dir} holds no chain")
        return
    if not existing.state.ended:
        if resume:
            return  # the live-submitter check follows, with the backend
        raise ChainDirError(f"{chain_dir} holds an active chain {existing.chain_id} ({existing.state.value}); "
                            "see chain status, or chain cancel")
    if new:
        return
    if existing.state is ChainState.COMPLETED and (not resume or flags.get("max_iter") is None):
        raise ChainDirError(
            f"{chain_dir} holds the completed chain {existing.chain_id}: extend it with "
            "chain submit --resume --max-iter N, or start a new chain with chain submit --new "
            "(keeps the old one; the app's checkpoint counter must start afresh) or --chain-dir DIR")
    if not resume:
        raise ChainDirError(f"{chain_dir} holds a {existing.state.value} chain {existing.chain_id}; continue it "
                            "with chain submit --resume, or start a new chain with chain submit --new "
                            "or --chain-dir DIR")


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


def _presubmit_first_runner(chain: ChainDir, status: ChainStatus, settings: Settings, backend: Backend,
                            workdir: Path) -> None:
    """Submit the first runner together with the submitter, which adopts it:
    one scheduling pass less before the app starts (with lookahead, the
    second runner too, queued behind the first). Skipped when there is
    nothing to run or the counter is unreadable (the submitter then stops the
    chain with the reason, as it would at any later point)."""
    if status.runner_live:
        return  # a resumed chain whose runner is still to be judged
    try:
        counter = read_counter(workdir / settings.ckpt_path)
    except CheckpointError:
        return
    if counter >= settings.max_iter:
        return
    chain.submit_runner(status, counter, settings.max_iter, time.time(),
                        lambda name: backend.submit(chain.scripts / RUNNER_SCRIPT, job_name=name, cwd=workdir),
                        echo=False)
    if settings.lookahead:
        # runner 2 queued now, not when the submitter job gets to it: on a
        # busy cluster the submitter may start after runner 1 has ended
        from chain.jobs.submitter import prequeue_next

        prequeue_next(chain, backend, status, workdir)


def _write_script(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755 & ~_umask())
    os.replace(tmp, path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FINISHING_WAIT = 120.0  # seconds resume waits for an ended chain's submitter to finish its report hook


def _refuse_live_submitter(backend: Backend, status: ChainStatus, *, wait: float = 0.0,
                           notify: Callable[[str], None] | None = None,
                           sleep: Callable[[float], None] = time.sleep,
                           clock: Callable[[], float] = time.monotonic) -> None:
    """Refuse to resume while a submitter of this chain is live.

    A chain that has ended (stopped, failed) may still have its submitter
    writing the report: then wait up to ``wait`` seconds for it to exit
    rather than send the user away for a few seconds.
    """
    ids = [status.submitter_job_id] if status.submitter_job_id else []
    for cycle in range(max(0, status.submitter_cycle - 1), status.submitter_cycle + 2):
        ids += backend.find_by_name(submitter_job_name(status.chain_id, cycle))
    ids = sorted(set(ids))
    deadline = clock() + wait
    told = False
    while True:
        infos = backend.query(ids)
        live = [i for i, info in infos.items() if info.state.active]
        if not live:
            return
        if not status.state.ended:
            raise ChainDirError(f"chain {status.chain_id} still has an active submitter (job {live[0]}); "
                                "nothing to resume")
        pending = [i for i in live if infos[i].state is JobState.PENDING]
        if pending:  # a successor submitter still queued: nothing will finish by itself
            raise ChainDirError(f"chain {status.chain_id} is {status.state.value} but its submitter job "
                                f"{pending[0]} is still queued: scancel it, then resume")
        if clock() >= deadline:
            raise ChainDirError(f"chain {status.chain_id} is {status.state.value} but its submitter (job {live[0]}) "
                                f"is still finishing its report after {wait:.0f}s; resume when it has ended")
        if notify and not told:
            notify(f"waiting for submitter job {live[0]} to finish the {status.state.value} chain's report")
            told = True
        sleep(min(2.0, max(0.0, deadline - clock())))


def open_chain(chain_dir: str | os.PathLike[str]) -> tuple[ChainDir, ChainStatus]:
    chain_dir = Path(chain_dir)
    chain = ChainDir(chain_dir)
    if not chain_dir.exists():
        raise ChainDirError(f"no chain in {chain_dir} (directory does not exist)")
    status = chain.load_status()
    if status is None:
        raise ChainDirError(f"no chain in {chain_dir} (no state.json)")
    return chain, status


METRICS_WINDOW = 200  # rate, ETA and efficiency over the last runners: O(1) status on long chains


def status_report(chain_dir: Path, *, live: bool = True, history: int | None = None) -> dict[str, Any]:
    """Everything ``chain status`` shows, as one JSON-able dict."""
    chain, status = open_chain(chain_dir)
    settings = stored_settings(chain)
    if history is None:
        runners = list(chain.iter_runners())
        total = len(runners)
        recent = runners[-METRICS_WINDOW:]
    else:
        recent, total = chain.recent_runners(max(history, METRICS_WINDOW))
        runners = recent[-history:] if history else []
    current = chain.read_record(status.runner_job_id) if status.runner_live and status.runner_job_id else None
    slurm: dict[str, JobInfo] = {}
    scheduler_error = ""
    if live and not status.state.ended:
        ids = [i for i in (status.submitter_job_id, status.runner_job_id if status.runner_live else "") if i]
        try:
            slurm = make_backend(status.backend or "slurm", chain_dir).query(ids)
        except SchedulerError as exc:
            scheduler_error = str(exc)
    iteration = status.iteration
    try:
        iteration = read_counter(Path(status.workdir) / settings.ckpt_path)
    except CheckpointError:  # the status view must not fail on a bad counter
        pass

    from chain.reporting.metrics import chain_metrics

    metrics = chain_metrics(recent[-METRICS_WINDOW:] + ([current] if current else []), iteration, settings.max_iter,
                            time.time(), ended=status.state.ended)
    outputs = [str(p) for p in (chain.reports / "usage.csv", chain.reports / "summary.json",
                                chain.reports / "progress.png") if p.exists()]

    def job_state(job_id: str) -> str:
        info = slurm.get(job_id)
        return info.state.value if info else ""

    report: dict[str, Any] = {
        "chain_id": status.chain_id,
        "state": status.state.value,
        "reason": status.reason,
        "iteration": iteration,
        "max_iter": settings.max_iter,
        "backend": status.backend,
        "submitter_cycle": status.submitter_cycle,
        "submitter_job_id": status.submitter_job_id,
        "submitter_state": job_state(status.submitter_job_id),
        "runner_job_id": status.runner_job_id if status.runner_live else "",
        "runner_state": job_state(status.runner_job_id) if status.runner_live else "",
        "current_runner": current,
        "runners": [
            {k: r.get(k) for k in ("job_id", "seq", "state", "exit_code", "iter_before", "iter_after",
                                   "verdict", "reason", "start", "end")}
            for r in runners
        ],
        "runner_count": total,
        "hooks": status.hooks,
        "metrics": metrics,
        "outputs": outputs,
        "created": status.created,
        "updated": status.updated,
        "completed_at": status.completed_at or None,
        "workdir": status.workdir,
        "chain_dir": str(chain.root),
        "log": str(chain.log_file),
    }
    if scheduler_error:
        report["scheduler_error"] = scheduler_error
    report["nothing_driving"] = _nothing_driving(status, slurm, live and not scheduler_error)
    if status.state in (ChainState.FAILED, ChainState.STOPPED):
        report["failure"] = _failure_output(chain, runners[-1] if runners else chain.last_runner())
    return report


FAILURE_TAIL_LINES = 12


def _nothing_driving(status: ChainStatus, slurm: Mapping[str, JobInfo], asked: bool) -> bool:
    """A chain that is not over while no job of it can act: its submitter
    job ended, or the scheduler no longer knows it (``chain submit --resume``)."""
    if status.state.ended or not asked or not status.submitter_job_id:
        return False
    info = slurm.get(status.submitter_job_id)
    return info is None or not info.state.active


def _failure_output(chain: ChainDir, runner: dict[str, Any] | None) -> dict[str, Any] | None:
    """The failing runner's output: its path and last lines, for ``chain status``."""
    if not runner or not isinstance(runner.get("job_id"), str):
        return None
    path = chain.runner_output(runner["job_id"])
    return {"job_id": runner["job_id"], "log": str(path), "tail": tail_lines(path, FAILURE_TAIL_LINES)}


def cancel(chain_dir: Path, *, wait: float = 60.0) -> str:
    """Stop the submitter and the runner (the app gets SIGTERM and may
    checkpoint), and mark the chain cancelled."""
    chain, status = open_chain(chain_dir)
    if status.state.ended:
        return f"chain {status.chain_id} already {status.state.value}"
    backend = make_backend(status.backend or "slurm", chain_dir)
    chain.cancel_file.write_text(f"{time.time()}\n", encoding="utf-8")
    submitters = {status.submitter_job_id} if status.submitter_job_id else set()
    for cycle in range(max(0, status.submitter_cycle - 1), status.submitter_cycle + 2):
        submitters.update(backend.find_by_name(submitter_job_name(status.chain_id, cycle)))
    for job in sorted(submitters):
        backend.cancel(job)
    runner = status.runner_job_id if status.runner_live else ""
    if runner:
        backend.cancel(runner)  # Slurm sends SIGTERM first: the app can checkpoint
    if status.next_job_id:
        backend.cancel(status.next_job_id)  # lookahead's pre-queued runner
    watched = sorted(submitters | ({runner} if runner else set()))
    deadline = time.time() + wait
    while time.time() < deadline:
        infos = backend.query(watched)
        if not any(i.state.active for i in infos.values()):
            break
        time.sleep(0.5)
    status = chain.load_status() or status
    if status.runner_live and status.runner_job_id:
        # The submitter was stopped before it could judge its runner.
        record = chain.read_record(status.runner_job_id) or {}
        chain.judge_runner(runner_entry(
            status, record, state="CANCELLED", exit_code=record.get("exit_code"),
            iter_before=record.get("iter_before", status.iter_before),
            iter_after=record.get("iter_after", status.iter_before), verdict="stop",
            reason="cancelled by chain cancel", recorded="exit_code" in record))
        status.runner_live = False
    if status.next_job_id:
        chain.log(f"lookahead: cancelled the pre-queued runner job {status.next_job_id}", echo=False)
        status.next_job_id = ""
    if not status.state.ended:
        status.state = ChainState.CANCELLED
        status.reason = "cancelled by chain cancel"
    chain.save_status(status)
    chain.log(f"chain {status.chain_id} cancelled", echo=False)
    return f"chain {status.chain_id} cancelled"
