"""An embedded Slurm-like backend: the same sbatch scripts as local processes.

For machines without a cluster (a laptop, CI). Each submitted job gets a
detached supervisor process (``chain.backends.local.supervisor``) that honours
the script's ``#SBATCH`` time limit, output files and dependencies, and writes
the job's record into a spool directory; every query reads those records, so
jobs outlive the process that submitted them, as with Slurm. Anchor:
submitit's LocalExecutor.

Debugging verbs::

    python -m chain.backends.local queue SPOOL [--all]
    python -m chain.backends.local show SPOOL ID
    python -m chain.backends.local cancel SPOOL ID [--signal SIG]
    python -m chain.backends.local end-time SPOOL ID
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import chain
from chain.backends.base import Backend, JobInfo, JobState
from chain.backends.local.supervisor import (
    JobRecord,
    Spool,
    current_user,
    parse_dependency,
    same_process,
    short_hostname,
    supervise_main,
)
from chain.errors import ConfigError, SchedulerError
from chain.core.timefmt import format_duration, parse_slurm_time

TIME_SCALE_ENV = "CHAIN_LOCAL_TIME_SCALE"  # test knob: multiplies every time limit
KILL_WAIT_ENV = "CHAIN_LOCAL_KILL_WAIT"  # test knob: KillWait for backends built in jobs
_REGISTER_TIMEOUT = 30.0  # seconds submit() waits for the supervisor to register

# sbatch options we act on, by long name; short aliases map onto them.
_SHORT = {"t": "time", "o": "output", "e": "error", "J": "job-name", "d": "dependency",
          "D": "chdir"}
_WANTED = frozenset(_SHORT.values()) | {"open-mode"}


@dataclass(frozen=True)
class Directives:
    """What the leading ``#SBATCH`` block of a script asks for."""

    time: str | None = None
    output: str | None = None
    error: str | None = None
    job_name: str | None = None
    dependency: str | None = None
    chdir: str | None = None
    open_mode: str | None = None


def parse_directives(text: str) -> Directives:
    """Read ``#SBATCH`` lines like sbatch: only up to the first command line.

    Both ``--opt=value`` and ``--opt value`` (and ``-t value``/``-tvalue``);
    values may be shell-quoted; later directives win; unknown options ignored.
    """
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if number == 0 and line.startswith("#!"):
            continue
        if not line:
            continue
        if not line.startswith("#"):
            break  # sbatch stops at the first command
        if not (line.startswith("#SBATCH") and line[7:8] in (" ", "\t")):
            continue
        try:
            tokens = shlex.split(line[7:], comments=True)
        except ValueError as exc:
            raise SchedulerError(f"cannot parse directive {line!r}: {exc}") from exc
        _parse_tokens(tokens, found)
    return Directives(
        time=found.get("time"),
        output=found.get("output"),
        error=found.get("error"),
        job_name=found.get("job-name"),
        dependency=found.get("dependency"),
        chdir=found.get("chdir"),
        open_mode=found.get("open-mode"),
    )


def _parse_tokens(tokens: list[str], found: dict[str, str]) -> None:
    i = 0
    while i < len(tokens):
        token = tokens[i]
        value: str | None = None
        if token.startswith("--"):
            name, eq, inline = token[2:].partition("=")
            value = inline if eq else None
        elif token.startswith("-") and len(token) > 1:
            name = _SHORT.get(token[1], f"-{token[1]}")
            value = token[2:] or None
        else:
            i += 1  # a stray word: not an option
            continue
        # Options we ignore may be value-less flags (--exclusive): only take a
        # separate value when it does not look like the next option.
        if value is None and i + 1 < len(tokens):
            following = tokens[i + 1]
            if name in _WANTED or not following.startswith("-"):
                value = following
                i += 1
        if name in _WANTED and value is not None:
            found[name] = value
        i += 1


def _substitute(pattern: str, job_id: str, name: str, user: str) -> str:
    """sbatch's filename patterns: %j %A (job id), %x (name), %u, %N, %%."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and i + 1 < len(pattern):
            code = pattern[i + 1]
            replacement = {"j": job_id, "A": job_id, "x": name, "u": user,
                           "N": short_hostname(), "%": "%", "a": "4294967294"}.get(code)
            if replacement is not None:
                out.append(replacement)
                i += 2
                continue
        out.append(char)
        i += 1
    return "".join(out)


def _time_limit(text: str | None, scale: float) -> float | None:
    if text is None or text.strip().upper() in ("UNLIMITED", "INFINITE", "0"):
        return None  # sbatch: --time=0 means no limit
    try:
        return parse_slurm_time(text, what="--time") * scale
    except ConfigError as exc:
        raise SchedulerError(f"sbatch: {exc}") from exc


def _float_env(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError as exc:
        raise ConfigError(f"{name}={text!r} is not a number") from exc


def _signal_number(name: str) -> signal.Signals:
    text = name.strip().upper()
    if text.isdigit():
        return signal.Signals(int(text))
    if not text.startswith("SIG"):
        text = "SIG" + text
    try:
        return signal.Signals[text]
    except KeyError as exc:
        raise SchedulerError(f"scancel: unknown signal {name!r}") from exc


def record_to_info(record: JobRecord) -> JobInfo:
    return JobInfo(
        job_id=record.job_id,
        state=JobState.parse(record.state),
        exit_code=record.exit_code,
        signal=record.signal or None,  # Slurm's ":0" means no signal
        reason=record.reason,
        name=record.name,
        start=record.start,
        end=record.end,
        cancelled_by=record.cancelled_by,
        source="local",
    )


class LocalBackend(Backend):
    """Runs jobs as local processes with Slurm-like states, limits and dependencies.

    ``time_scale`` multiplies every time limit (tests turn ``--time=1`` into
    seconds); ``kill_wait`` is Slurm's KillWait. When not given, both come
    from ``CHAIN_LOCAL_TIME_SCALE``/``CHAIN_LOCAL_KILL_WAIT`` so that a
    backend built inside a local job (the chain's submitter) inherits them.
    """

    name = "local"
    cheap_queries = True

    def __init__(
        self, spool: Path, *, kill_wait: float | None = None, time_scale: float | None = None
    ) -> None:
        self.spool = Spool(Path(spool))
        self.kill_wait = kill_wait if kill_wait is not None else _float_env(KILL_WAIT_ENV, 30.0)
        self.time_scale = (
            time_scale if time_scale is not None else _float_env(TIME_SCALE_ENV, 1.0)
        )
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
    ) -> str:
        try:
            text = Path(script).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SchedulerError(f"sbatch: cannot read {script}: {exc}") from exc
        found = parse_directives(text)
        name = job_name or found.job_name or Path(script).name
        dependency = dependency if dependency is not None else found.dependency
        if dependency:
            try:
                parse_dependency(dependency)
            except ValueError as exc:
                raise SchedulerError(f"sbatch: invalid dependency {dependency!r}: {exc}") from exc
        limit = _time_limit(found.time, self.time_scale)
        submit_dir = Path(cwd if cwd is not None else os.getcwd()).absolute()
        work_dir = submit_dir / found.chdir if found.chdir else submit_dir
        user = current_user()

        open_mode = "truncate" if found.open_mode == "truncate" else "append"

        def make(job_id: str) -> JobRecord:
            # sbatch keeps its own copy: later edits of the file do not reach the job.
            batch = self.spool.script_path(job_id)
            batch.write_text(text)
            stdout = work_dir / _substitute(found.output or "slurm-%j.out", job_id, name, user)
            stderr = (work_dir / _substitute(found.error, job_id, name, user)
                      if found.error else stdout)
            return JobRecord(
                job_id=job_id,
                name=name,
                user=user,
                batch_script=str(batch),
                script=str(Path(script).absolute()),
                submit_dir=str(submit_dir),
                work_dir=str(work_dir),
                stdout=str(stdout),
                stderr=str(stderr),
                open_mode=open_mode,
                dependency=dependency or None,
                time_limit=limit,
                time_limit_text=found.time,
                time_scale=self.time_scale,
                kill_wait=self.kill_wait,
                env=dict(env or {}),
                submit_time=time.time(),
                reason="Dependency" if dependency else "None",
                hostname=short_hostname(),
            )

        try:
            job_id = self.spool.create(make).job_id
        except OSError as exc:
            raise SchedulerError(f"local backend: cannot write to spool {self.spool.root}: "
                                 f"{exc}") from exc
        self._start_supervisor(job_id)
        return job_id

    def _start_supervisor(self, job_id: str) -> None:
        log = self.spool.log_path(job_id)
        # cwd = the directory holding the `chain` package, so `-m` finds it
        # even when it is not installed; the job's own cwd is in the record.
        package_root = Path(chain.__file__).absolute().parent.parent
        with open(log, "ab") as log_fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "chain.backends.local", "_supervise",
                 str(self.spool.root), job_id],
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
                    record.finish("FAILED", reason="supervisor failed to start", exit_code=1)
                    self.spool.write(record)
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise SchedulerError(f"local backend: supervisor of job {job_id} failed: {tail}")

    def query(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
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
            if record.state == "PENDING":
                # Not started, and the supervisor starts it only under this lock
                # after re-reading: finishing the record here is the whole cancel.
                record.finish("CANCELLED", reason="None")
                self.spool.write(record)
                return
            record.cancel_requested = True
            self.spool.write(record)
            # Wake the supervisor; it also re-reads the record every second.
            if same_process(record.supervisor_pid, record.supervisor_ticks, record.boot_id):
                assert record.supervisor_pid is not None
                os.kill(record.supervisor_pid, _signal_number("TERM"))

    def _signal_batch(self, job_id: str, sig: signal.Signals) -> None:
        # Under the lock the batch shell is unreaped while the record says
        # RUNNING (the supervisor reaps it after recording the end): no pid reuse.
        with self.spool.locked(job_id):
            record = self.spool.read(job_id)
            if record is None or not record.active:
                return
            if record.state == "PENDING" or record.batch_pid is None:
                raise SchedulerError(f"scancel: job {job_id} is pending execution")
            try:
                os.kill(record.batch_pid, sig)
            except ProcessLookupError:
                pass

    def end_time(self, job_id: str) -> float | None:
        record = self.spool.refresh(str(job_id))
        if record is None or record.state != "RUNNING":
            return None
        return record.end

    def available(self) -> bool:
        return True


# --- command line -----------------------------------------------------------


def _queue(spool: Spool, show_all: bool) -> None:
    rows = [("JOBID", "NAME", "STATE", "TIME", "TIME_LIMIT", "EXIT", "REASON")]
    now = time.time()
    for job_id in spool.all_ids():
        record = spool.refresh(job_id)
        if record is None or not (show_all or record.active):
            continue
        if record.start is None:
            elapsed = "-"
        else:
            elapsed = format_duration((record.end if not record.active and record.end else now)
                                      - record.start)
        limit = "UNLIMITED" if record.time_limit is None else format_duration(record.time_limit)
        code = "-" if record.exit_code is None else f"{record.exit_code}:{record.signal or 0}"
        rows.append((job_id, record.name, record.state, elapsed, limit, code, record.reason))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chain.backends.local")
    verbs = parser.add_subparsers(dest="verb", required=True)
    sup = verbs.add_parser("_supervise", help=argparse.SUPPRESS)
    sup.add_argument("spool")
    sup.add_argument("job_id")
    queue = verbs.add_parser("queue", help="squeue-like table (active jobs; --all for every job)")
    queue.add_argument("spool")
    queue.add_argument("-a", "--all", action="store_true")
    for verb, helptext in (("show", "print a job's record"), ("end-time", "scheduled end"),
                           ("cancel", "cancel a job or send it a signal")):
        sub = verbs.add_parser(verb, help=helptext)
        sub.add_argument("spool")
        sub.add_argument("job_id")
        if verb == "cancel":
            sub.add_argument("-s", "--signal")
    args = parser.parse_args(argv)
    if args.verb == "_supervise":
        return supervise_main(args.spool, args.job_id)
    spool = Spool(Path(args.spool))
    if args.verb == "queue":
        _queue(spool, args.all)
        return 0
    if args.verb == "show":
        record = spool.refresh(args.job_id)
        if record is None:
            print(f"no job {args.job_id}", file=sys.stderr)
            return 1
        print(json.dumps(record.to_json(), indent=1, sort_keys=True))
        return 0
    backend = LocalBackend(spool.root)
    if args.verb == "end-time":
        end = backend.end_time(args.job_id)
        print("" if end is None else int(end))
        return 0
    try:
        backend.cancel(args.job_id, signal=args.signal)
    except SchedulerError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0
