"""An embedded Slurm-like backend: the same sbatch scripts as local processes.

For machines without a cluster (a laptop, CI). Each submitted job gets a
detached supervisor process (``chain.backends.local.supervisor``) that honours
the script's ``#SBATCH`` time limit, output files and dependencies
(``sbatch``, ``dependency``), and writes the job's record into a spool
directory (``spool``); every query reads those records, so jobs outlive the
process that submitted them, as with Slurm. Anchor: submitit's
LocalExecutor. Debugging verbs: ``python -m chain.backends.local``
(``commands``).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import chain
from chain.backends.base import Backend, JobInfo, JobState, JobUsage
from chain.backends.local.dependency import parse_dependency
from chain.backends.local.sbatch import Directives, parse_directives, substitute, time_limit
from chain.backends.local.spool import JobRecord, Spool, current_user, short_hostname
from chain.errors import ChainDirError, ConfigError, SchedulerError
from chain.primitives import procs
from chain.primitives.signals import signal_named

TIME_SCALE_ENV = "CHAIN_LOCAL_TIME_SCALE"  # test knob: multiplies every time limit
KILL_WAIT_ENV = "CHAIN_LOCAL_KILL_WAIT"  # test knob: KillWait for backends built in jobs
_REGISTER_TIMEOUT = 30.0  # seconds submit() waits for the supervisor to register


def env_number(name: str, default: float, *, positive: bool = False) -> float:
    """A number >= 0 (> 0 if ``positive``) from the environment, ``default``
    when unset or blank; anything else is a one-line ConfigError."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ConfigError(f"{name}={text!r} must be a number {'>' if positive else '>='} 0")
    return value


def _signal_number(name: str) -> signal.Signals:
    sig = signal_named(name, numbers=True)
    if sig is None:
        raise SchedulerError(f"scancel: unknown signal {name!r}")
    return sig


def record_to_info(record: JobRecord) -> JobInfo:
    return JobInfo(
        job_id=record.job_id,
        state=record.state,
        exit_code=record.exit_code,
        signal=record.signal or None,  # Slurm's ":0" means no signal
        reason=record.reason,
        name=record.name,
        start=record.start,
        end=record.end,
        cancelled_by=record.cancelled_by,
        source="local",
    )


def local_usage(record: JobRecord, now: float) -> JobUsage:
    """Pure: a job record as Slurm's accounting would show it. Its end is
    the scheduled one while it runs, so a running job's elapsed is up to
    ``now``. No CPUs are allocated here: ``alloc_cpus`` stays None."""
    end = None if record.active else record.end
    upto = now if record.active else end
    elapsed: float | None
    if record.start is None:
        elapsed = 0.0  # never started (pending, or cancelled before it ran): held nothing
    else:
        elapsed = max(0.0, upto - record.start) if upto is not None else None
    return JobUsage(
        job_id=record.job_id,
        state=record.state.value,
        exit_code="" if record.exit_code is None else f"{record.exit_code}:{record.signal or 0}",
        submit=record.submit_time,
        start=record.start,
        end=end,
        elapsed=elapsed,
        node=record.hostname or "",
    )


@dataclass(frozen=True)
class _Request:
    """One submission, checked: what ``_record`` turns into a job record."""

    script: Path
    text: str
    found: Directives
    name: str
    dependency: str | None
    limit: float | None
    submit_dir: Path
    env: dict[str, str]


class LocalBackend(Backend):
    """Runs jobs as local processes with Slurm-like states, limits and dependencies.

    ``time_scale`` multiplies every time limit (tests turn ``--time=1`` into
    seconds); ``kill_wait`` is Slurm's KillWait. When not given, both come
    from ``CHAIN_LOCAL_TIME_SCALE``/``CHAIN_LOCAL_KILL_WAIT`` so that a
    backend built inside a local job (the chain's submitter) inherits them.
    """

    name = "local"
    cheap_queries = True
    job_steps = False  # no srun here: a launcher runs directly, on this one node
    # usage() answers from the jobs' own records: no accounting of CPUs or memory.
    usage_source = "local backend"
    accounting = False

    def __init__(self, spool: Path, *, kill_wait: float | None = None, time_scale: float | None = None) -> None:
        self.spool = Spool(Path(spool))
        self.kill_wait = kill_wait if kill_wait is not None else env_number(KILL_WAIT_ENV, 30.0)
        self.time_scale = time_scale if time_scale is not None else env_number(TIME_SCALE_ENV, 1.0, positive=True)
        if self.time_scale <= 0 or self.kill_wait < 0:
            raise ConfigError("time_scale must be > 0 and kill_wait >= 0")

    # --- Backend ----------------------------------------------------------

    def submit(
        self,
        script: Path,
        *,
        job_name: str,
        dependency: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        exclude: Sequence[str] = (),  # one host: nothing to leave out
    ) -> str:
        try:
            text = Path(script).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SchedulerError(f"sbatch: cannot read {script}: {exc}") from exc
        found = parse_directives(text)
        dependency = dependency if dependency is not None else found.dependency
        if dependency:
            try:
                parse_dependency(dependency)
            except ValueError as exc:
                raise SchedulerError(f"sbatch: invalid dependency {dependency!r}: {exc}") from exc
        request = _Request(
            script=Path(script).absolute(),
            text=text,
            found=found,
            name=job_name or found.job_name or Path(script).name,
            dependency=dependency or None,
            limit=time_limit(found.time, self.time_scale),
            submit_dir=Path(cwd if cwd is not None else os.getcwd()).absolute(),
            env=dict(env or {}),
        )
        try:
            job_id = self.spool.create(lambda new_id: self._record(new_id, request)).job_id
        except OSError as exc:
            raise SchedulerError(f"local backend: cannot write to spool {self.spool.root}: {exc}") from exc
        self._start_supervisor(job_id)
        return job_id

    def _record(self, job_id: str, request: _Request) -> JobRecord:
        """The new job's record (written by the spool under its counter's lock)."""
        batch = self.spool.write_script(job_id, request.text)
        found, name, user = request.found, request.name, current_user()
        work_dir = request.submit_dir / found.chdir if found.chdir else request.submit_dir
        stdout = work_dir / substitute(found.output or "slurm-%j.out", job_id, name, user)
        stderr = work_dir / substitute(found.error, job_id, name, user) if found.error else stdout
        return JobRecord(
            job_id=job_id,
            name=name,
            user=user,
            batch_script=str(batch),
            script=str(request.script),
            submit_dir=str(request.submit_dir),
            work_dir=str(work_dir),
            stdout=str(stdout),
            stderr=str(stderr),
            open_mode="truncate" if found.open_mode == "truncate" else "append",
            dependency=request.dependency,
            time_limit=request.limit,
            time_limit_text=found.time,
            time_scale=self.time_scale,
            kill_wait=self.kill_wait,
            env=request.env,
            submit_time=time.time(),
            reason="Dependency" if request.dependency else "None",
            hostname=short_hostname(),
        )

    def _start_supervisor(self, job_id: str) -> None:
        log = self.spool.log_path(job_id)
        # cwd = the directory holding the `chain` package, so `-m` finds it
        # even when it is not installed; the job's own cwd is in the record.
        package_root = Path(chain.__file__).absolute().parent.parent
        with open(self.spool.open_log(job_id), "ab") as log_fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "chain.backends.local", "_supervise", str(self.spool.root), job_id],
                cwd=package_root,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=log_fh,
                start_new_session=True,  # no SIGHUP/SIGINT from the caller's terminal
            )
        try:
            # The first process only forks the real supervisor, registers it and exits.
            returncode = proc.wait(timeout=_REGISTER_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            returncode = -1
        if returncode != 0:
            with self.spool.locked(job_id):
                record = self.spool.read(job_id)
                if record is not None and record.active:
                    record.finish(JobState.FAILED, reason="supervisor failed to start", exit_code=1)
                    self.spool.write(record)
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise SchedulerError(f"local backend: supervisor of job {job_id} failed: {tail}")

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        result: dict[str, JobInfo] = {}
        for job_id in job_ids:
            record = self.spool.refresh(str(job_id))
            if record is not None:
                result[record.job_id] = record_to_info(record)
        return result

    def find_by_name(self, job_name: str) -> list[str]:
        return self.spool.ids_by_name(job_name)

    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        # No job steps here (no srun): a signal always goes to the batch shell.
        record = self.spool.refresh(str(job_id))
        if record is None:
            raise SchedulerError(f"scancel: Invalid job id specified: {job_id}")
        if signal is not None:
            self._signal_batch(record.job_id, _signal_number(signal))
            return
        with self.spool.locked(record.job_id):
            record = self.spool.read(record.job_id)
            if record is None or not record.active:
                return  # already ended: nothing to do
            record.cancelled_by = record.cancelled_by or current_user()
            if record.state is JobState.PENDING:
                # Not started, and the supervisor starts it only under this lock
                # after re-reading: finishing the record here is the whole cancel.
                record.finish(JobState.CANCELLED, reason="None")
                self.spool.write(record)
                return
            record.cancel_requested = True
            self.spool.write(record)
            # Wake the supervisor (it also re-reads the record every second): only
            # the very process recorded, never one that took its pid since.
            term = _signal_number("TERM")
            procs.send(record.supervisor_pid, record.supervisor_ticks, record.boot_id, term, group=False)

    def _signal_batch(self, job_id: str, sig: signal.Signals) -> None:
        # Under the lock the batch shell is unreaped while the record says
        # RUNNING (the supervisor reaps it after recording the end): no pid reuse.
        with self.spool.locked(job_id):
            record = self.spool.read(job_id)
            if record is None or not record.active:
                return
            if record.state is JobState.PENDING or record.batch_pid is None:
                raise SchedulerError(f"scancel: job {job_id} is pending execution")
            why = procs.send(record.batch_pid, record.batch_ticks, record.boot_id, sig, group=False)
            if why:
                raise SchedulerError(f"scancel: job {job_id} not signalled: {why}")

    def scheduler_end(self, job_id: str) -> float | None:
        record = self.spool.refresh(str(job_id))
        if record is None or record.state is not JobState.RUNNING:
            return None
        return record.end

    def usage(self, job_ids: Sequence[str]) -> dict[str, JobUsage]:
        """The jobs' own records, read only (a report never changes a job's
        record); a corrupt or unreadable record leaves its job out."""
        now = time.time()
        found: dict[str, JobUsage] = {}
        for job_id in dict.fromkeys(job_ids):
            try:
                record = self.spool.read(str(job_id))
            except ChainDirError:  # corrupt or unreadable: the report goes on without it
                continue
            if record is not None:
                found[str(job_id)] = local_usage(record, now)
        return found

    def available(self) -> bool:
        return True
