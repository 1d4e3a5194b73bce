"""The local backend's on-disk spool and the per-job supervisor process.

Layout of a spool directory (every file is plain text, safe to inspect)::

    counter                 last job id handed out (read-modify-write under flock)
    jobs/<id>.json          the job record (JobRecord), replaced atomically
    jobs/<id>.lock          flock held for every read-modify-write of the record
    jobs/<id>.sh            the batch script as submitted (sbatch copies it too)
    jobs/<id>.supervisor.log  the supervisor's own stderr (tracebacks only)
    names/<quoted name>/<id>  empty marker files: find_by_name and singleton

The supervisor (``python -m chain.backends.local _supervise SPOOL ID``)
detaches with a double fork, waits for the job's dependencies, runs the batch
script as its own process group, enforces the time limit and cancel requests,
and writes the final state. Readers never need the supervisor: the record is
the truth, and a record whose supervisor vanished is finished as NODE_FAIL by
whoever looks at it next (``refresh``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import getpass
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from chain.errors import SchedulerError

POLL = 0.1  # seconds between looks at the spool / the job: local files, cheap
# A record still without a supervisor this long after submit lost its submitter
# mid-submit (submit() itself waits for the supervisor to register).
_UNREGISTERED_GRACE = 60.0
LOST_REASON = "supervisor lost"

ACTIVE_STATES = ("PENDING", "RUNNING")


@dataclass
class JobRecord:
    """One job, as stored in ``jobs/<id>.json``."""

    job_id: str
    name: str
    user: str
    batch_script: str  # the spool copy that runs
    script: str  # the path given to submit(), for humans
    submit_dir: str
    work_dir: str
    stdout: str
    stderr: str
    open_mode: str  # "append" or "truncate"
    dependency: str | None
    time_limit: float | None  # seconds after scaling; None = unlimited
    time_limit_text: str | None  # the --time value as written
    time_scale: float
    kill_wait: float
    env: dict[str, str]  # added on top of the submitter's environment
    submit_time: float
    state: str = "PENDING"
    reason: str = "None"
    start: float | None = None
    end: float | None = None  # scheduled end while RUNNING, real end after
    exit_code: int | None = None  # Slurm's ExitCode N:S as two ints
    signal: int | None = None
    cancel_requested: bool = False
    cancelled_by: str | None = None
    boot_id: str | None = None
    supervisor_pid: int | None = None
    supervisor_ticks: int | None = None  # /proc/<pid>/stat starttime: pid reuse guard
    batch_pid: int | None = None  # the batch shell, leader of the job's process group
    batch_ticks: int | None = None
    hostname: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # fields of newer versions

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names}
        record = cls(**known)
        record.extra.update(extra)
        return record

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        extra = data.pop("extra")
        data.update(extra)
        return data

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def finish(self, state: str, *, reason: str, exit_code: int = 0, sig: int = 0) -> None:
        self.state = state
        self.reason = reason
        self.exit_code = exit_code
        self.signal = sig
        self.end = time.time()


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # containers without a passwd entry
        return str(os.getuid())


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def boot_id() -> str | None:
    """Changes at every reboot: /proc start times are only comparable within one boot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def proc_ticks(pid: int) -> int | None:
    """Start time of a live (non-zombie) process in clock ticks since boot.

    None when there is no such process, it is a zombie, or /proc is missing.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def same_process(pid: int | None, ticks: int | None, boot: str | None) -> bool:
    """Is ``pid`` still the process we recorded (same boot, same start time)?"""
    if pid is None:
        return False
    if not Path("/proc").is_dir():  # no /proc (macOS): existence is all we can check
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if boot is not None and boot != boot_id():
        return False
    return ticks is not None and proc_ticks(pid) == ticks


class Spool:
    """The directory holding every job's record; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self.jobs = self.root / "jobs"
        self.names = self.root / "names"

    def ensure(self) -> None:
        self.jobs.mkdir(parents=True, exist_ok=True)
        self.names.mkdir(parents=True, exist_ok=True)

    def record_path(self, job_id: str) -> Path:
        return self.jobs / f"{job_id}.json"

    def script_path(self, job_id: str) -> Path:
        return self.jobs / f"{job_id}.sh"

    def log_path(self, job_id: str) -> Path:
        return self.jobs / f"{job_id}.supervisor.log"

    def create(self, make: Callable[[str], JobRecord]) -> JobRecord:
        """Allocate the next id and store ``make(id)`` with its name marker.

        All under the counter's flock: ids are unique across processes, and
        every id below the counter already has its record and marker, so a
        later singleton can never miss an earlier job that is still being
        submitted.
        """
        self.ensure()
        with open(self.root / "counter", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
            fh.seek(0)
            text = fh.read().strip()
            job_id = str((int(text) if text else 0) + 1)
            fh.seek(0)
            fh.truncate()
            fh.write(f"{job_id}\n")
            fh.flush()
            os.fsync(fh.fileno())
            record = make(job_id)
            self.write(record)
            self.add_name(record.name, job_id)
        return record

    @contextlib.contextmanager
    def locked(self, job_id: str) -> Iterator[None]:
        """Serialise read-modify-write of one record (client vs supervisor)."""
        with open(self.jobs / f"{job_id}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    def read(self, job_id: str) -> JobRecord | None:
        if not job_id.isdigit():  # ids index files: refuse anything path-like
            return None
        path = self.record_path(job_id)
        try:
            data = json.loads(path.read_text())
            return JobRecord.from_json(data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise SchedulerError(f"local backend: corrupt job record {path}: {exc}") from exc

    def write(self, record: JobRecord) -> None:
        """Atomic: readers see the old or the new record, never half of one."""
        path = self.record_path(record.job_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w") as fh:
            json.dump(record.to_json(), fh, indent=1, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())  # records must survive a reboot
        os.replace(tmp, path)

    def name_dir(self, name: str) -> Path:
        quoted = urllib.parse.quote(name, safe="")
        if len(quoted) > 200:  # file names stop at 255 bytes
            quoted = quoted[:100] + "-" + hashlib.sha256(name.encode()).hexdigest()
        return self.names / quoted

    def add_name(self, name: str, job_id: str) -> None:
        directory = self.name_dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / job_id).touch()

    def ids_by_name(self, name: str) -> list[str]:
        try:
            entries = os.listdir(self.name_dir(name))
        except FileNotFoundError:
            return []
        return sorted((e for e in entries if e.isdigit()), key=int)

    def all_ids(self) -> list[str]:
        try:
            entries = os.listdir(self.jobs)
        except FileNotFoundError:
            return []
        ids = (e[: -len(".json")] for e in entries if e.endswith(".json"))
        return sorted((i for i in ids if i.isdigit()), key=int)

    def refresh(self, job_id: str) -> JobRecord | None:
        """Read a record; finish it as NODE_FAIL if its supervisor is gone."""
        record = self.read(job_id)
        if record is None or not record.active or not self._supervisor_lost(record):
            return record
        with self.locked(job_id):
            record = self.read(job_id)
            if record is None or not record.active or not self._supervisor_lost(record):
                return record
            # Nobody enforces limits or cancels any more: a job left running
            # would race its successor, so kill what is left of it.
            kill_job_group(record, signal.SIGKILL)
            record.finish("NODE_FAIL", reason=LOST_REASON)
            self.write(record)
        return record

    @staticmethod
    def _supervisor_lost(record: JobRecord) -> bool:
        if record.supervisor_pid is None:
            return time.time() - record.submit_time > _UNREGISTERED_GRACE
        return not same_process(record.supervisor_pid, record.supervisor_ticks, record.boot_id)


def kill_job_group(record: JobRecord, sig: signal.Signals) -> None:
    """Signal the job's process group, unless its id may belong to someone else now.

    The group id is the batch shell's pid. While any member of the group
    lives, the kernel does not reuse that number; so the id is safe when the
    leader is still ours, or when no process holds the number at all.
    """
    pid = record.batch_pid
    if pid is None:
        return
    ours = same_process(pid, record.batch_ticks, record.boot_id)
    if not ours and Path(f"/proc/{pid}").exists() and proc_ticks(pid) is not None:
        return  # a different live process owns the number now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# --- dependencies -----------------------------------------------------------

Verdict = Literal["ok", "wait", "never"]


def parse_dependency(text: str) -> list[list[tuple[str, list[str]]]]:
    """``a:1:2,b:3?c:4`` -> OR-groups of AND-terms ``(type, ids)``.

    Slurm separates all-of terms with ``,`` and any-of terms with ``?``; a
    dependency uses one or the other, so both nest here as OR of ANDs.
    Raises ValueError for anything sbatch would refuse.
    """
    groups: list[list[tuple[str, list[str]]]] = []
    for alternative in text.split("?"):
        terms: list[tuple[str, list[str]]] = []
        for term in alternative.split(","):
            kind, _, rest = term.strip().partition(":")
            kind = kind.lower()
            if kind == "singleton" and not rest:
                terms.append((kind, []))
                continue
            if kind not in ("after", "afterany", "afterok", "afternotok", "aftercorr"):
                raise ValueError(f"unknown dependency type {kind!r}")
            ids = [i.split("+")[0] for i in rest.split(":")]  # "+minutes" delay ignored
            if not ids or not all(i.split("_")[0].isdigit() for i in ids):
                raise ValueError(f"bad job ids in dependency {term!r}")
            terms.append((kind, [i.split("_")[0] for i in ids]))
        groups.append(terms)
    return groups


def _term_verdict(
    spool: Spool, me: JobRecord, kind: str, ids: list[str], ended: set[str]
) -> Verdict:
    if kind == "singleton":
        for other_id in spool.ids_by_name(me.name):
            if int(other_id) < int(me.job_id) and other_id not in ended:
                other = spool.refresh(other_id)
                if other is not None and other.active:
                    return "wait"
                ended.add(other_id)  # ended jobs stay ended: read each once
        return "ok"
    verdicts: list[Verdict] = []
    for dep_id in ids:
        dep = spool.refresh(dep_id)
        if dep is None:  # purged ids count as satisfied in Slurm
            verdicts.append("ok")
        elif kind == "after":
            verdicts.append("wait" if dep.state == "PENDING" else "ok")
        elif dep.active:
            verdicts.append("wait")
        elif kind == "afterany":
            verdicts.append("ok")
        elif kind in ("afterok", "aftercorr"):
            verdicts.append("ok" if dep.state == "COMPLETED" else "never")
        else:  # afternotok
            verdicts.append("never" if dep.state == "COMPLETED" else "ok")
    return _all(verdicts)


def _all(verdicts: list[Verdict]) -> Verdict:
    if "never" in verdicts:
        return "never"
    return "wait" if "wait" in verdicts else "ok"


def dependency_verdict(spool: Spool, me: JobRecord, ended: set[str] | None = None) -> Verdict:
    """Can ``me`` start? ``ended`` caches ids known finished between calls."""
    if not me.dependency:
        return "ok"
    ended = set() if ended is None else ended
    alternatives = [
        _all([_term_verdict(spool, me, kind, ids, ended) for kind, ids in terms])
        for terms in parse_dependency(me.dependency)
    ]
    if "ok" in alternatives:
        return "ok"
    return "wait" if "wait" in alternatives else "never"


# --- the supervisor ---------------------------------------------------------


def job_environment(record: JobRecord) -> dict[str, str]:
    """The submitter's environment (inherited by the supervisor) + env + SLURM_*."""
    # SLURM_* left over from an enclosing job (the submitter job itself) would
    # describe the wrong job.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_"))}
    env.update(record.env)
    env.update(
        {
            "SLURM_JOB_ID": record.job_id,
            "SLURM_JOBID": record.job_id,
            "SLURM_JOB_NAME": record.name,
            "SLURM_JOB_USER": record.user,
            "SLURM_SUBMIT_DIR": record.submit_dir,
            "SLURM_SUBMIT_HOST": record.hostname,
            "SLURM_CLUSTER_NAME": "local",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NNODES": "1",
            "SLURM_NTASKS": "1",
            "SLURMD_NODENAME": short_hostname(),
            "CHAIN_LOCAL_SPOOL": str(Path(record.batch_script).parent.parent),
            "PWD": record.work_dir,
        }
    )
    if record.start is not None:
        env["SLURM_JOB_START_TIME"] = str(int(record.start))
        if record.end is not None:
            env["SLURM_JOB_END_TIME"] = str(int(record.end))  # as Slurm >= 23.02
    return env


class Supervisor:
    """Runs one job to its end; every decision is recorded under the job lock."""

    def __init__(self, spool: Spool, job_id: str) -> None:
        self.spool = spool
        self.job_id = job_id
        self.term_received = False  # SIGTERM: a cancel request (or a shutdown)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ended: set[str] = set()  # singleton peers seen finished

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.term_received = True

    def run(self) -> None:
        # A handler, not SIG_IGN: handlers reset to default in the exec'd job.
        signal.signal(signal.SIGTERM, self._on_term)
        try:
            if self._wait_dependencies():
                self._run_job()
        except BaseException as exc:
            self._crash(exc)
            raise

    def _wait_dependencies(self) -> bool:
        """Poll until runnable; False when the job ended while pending."""
        while True:
            record = self.spool.read(self.job_id)
            if record is None or record.state != "PENDING":
                return False  # cancelled while pending (cancel() wrote the record)
            if self.term_received:
                self._finish_pending_on_term()
                return False
            verdict = dependency_verdict(self.spool, record, self.ended)
            if verdict == "ok":
                return True
            reason = "Dependency" if verdict == "wait" else "DependencyNeverSatisfied"
            if record.reason != reason:
                with self.spool.locked(self.job_id):
                    record = self.spool.read(self.job_id)
                    if record is not None and record.state == "PENDING":
                        record.reason = reason
                        self.spool.write(record)
            # Slurm leaves a never-satisfiable job pending; no need to look often.
            time.sleep(POLL if verdict == "wait" else 1.0)

    def _finish_pending_on_term(self) -> None:
        with self.spool.locked(self.job_id):
            record = self.spool.read(self.job_id)
            if record is not None and record.state == "PENDING":
                record.finish("CANCELLED", reason="supervisor got SIGTERM")
                self.spool.write(record)

    def _start(self) -> JobRecord | None:
        """Start the batch shell under the lock, so cancel() sees PENDING or RUNNING."""
        with self.spool.locked(self.job_id):
            record = self.spool.read(self.job_id)
            if record is None or record.state != "PENDING":
                return None
            record.start = time.time()
            record.end = None if record.time_limit is None else record.start + record.time_limit
            try:
                mode = "ab" if record.open_mode == "append" else "wb"
                with contextlib.ExitStack() as files:
                    out = files.enter_context(open(record.stdout, mode))
                    err = (out if record.stderr == record.stdout
                           else files.enter_context(open(record.stderr, mode)))
                    self.proc = subprocess.Popen(
                        ["bash", record.batch_script],
                        cwd=record.work_dir,
                        env=job_environment(record),
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,  # own process group: signal it whole
                    )
            except OSError as exc:
                record.finish("FAILED", reason=f"launch failed: {exc}", exit_code=1)
                self.spool.write(record)
                return None
            record.state = "RUNNING"
            record.reason = "None"
            record.batch_pid = self.proc.pid
            record.batch_ticks = proc_ticks(self.proc.pid)
            self.spool.write(record)
            return record

    def _run_job(self) -> None:
        record = self._start()
        if record is None or self.proc is None:
            return
        outcome: str | None = None  # "TIMEOUT" / "CANCELLED" once we started killing
        kill_at: float | None = None
        last_look = time.time()
        while True:
            status = _exited(self.proc)
            if status is not None:
                break
            now = time.time()
            if outcome is None and record.end is not None and now >= record.end:
                outcome = "TIMEOUT"
            if outcome is None and (self.term_received or now - last_look >= 1.0):
                # The record is the truth; the signal only makes us look now.
                last_look = now
                fresh = self.spool.read(self.job_id)
                if self.term_received or (fresh is not None and fresh.cancel_requested):
                    outcome = "CANCELLED"
            if outcome is not None and kill_at is None:
                kill_job_group(record, signal.SIGTERM)
                kill_at = now + record.kill_wait
            elif kill_at is not None and now >= kill_at:
                kill_job_group(record, signal.SIGKILL)
                kill_at = float("inf")
            time.sleep(POLL)
        # The batch shell is a zombie now (not reaped), so its pid and group id
        # cannot be reused: kill leftovers, as Slurm does when the batch step ends.
        kill_job_group(record, signal.SIGKILL)
        code, sig = status
        with self.spool.locked(self.job_id):
            final = self.spool.read(self.job_id) or record
            if outcome == "TIMEOUT":
                final.finish("TIMEOUT", reason="TimeLimit")  # ExitCode 0:0 like Slurm
            elif outcome == "CANCELLED":
                if not final.cancel_requested:
                    final.reason = "supervisor got SIGTERM"
                final.finish("CANCELLED", reason=final.reason, exit_code=code, sig=sig)
            elif code == 0 and sig == 0:
                final.finish("COMPLETED", reason="None")
            else:
                final.finish("FAILED", reason="NonZeroExitCode", exit_code=code, sig=sig)
            self.spool.write(final)
        self.proc.wait()  # reap only now that the record no longer names the pid

    def _crash(self, exc: BaseException) -> None:
        """Best effort: never leave a job RUNNING behind a dead supervisor."""
        with contextlib.suppress(Exception), self.spool.locked(self.job_id):
            record = self.spool.read(self.job_id)
            if record is not None and record.active:
                kill_job_group(record, signal.SIGKILL)
                record.finish("NODE_FAIL", reason=f"supervisor error: {exc!r}")
                self.spool.write(record)


def _exited(proc: subprocess.Popen[bytes]) -> tuple[int, int] | None:
    """(exit code, signal) once the child ended, without reaping it where possible."""
    if hasattr(os, "waitid"):
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None or info.si_pid == 0:
            return None
        if info.si_code == os.CLD_EXITED:
            return info.si_status, 0
        return 0, info.si_status  # killed or dumped: Slurm's ExitCode 0:S
    returncode = proc.poll()  # no waitid (macOS): reaps, tiny pid-reuse window
    if returncode is None:
        return None
    return (returncode, 0) if returncode >= 0 else (0, -returncode)


def supervise_main(spool_dir: str, job_id: str) -> int:
    """Entry of ``_supervise``: detach, register, run.

    The process submit() started forks once more and exits: the supervisor is
    then an orphan adopted by init (no zombie in a long-lived submitter, no
    controlling terminal), and submit() learns by our exit status that the
    supervisor is registered.
    """
    spool = Spool(Path(spool_dir))
    child = os.fork()
    if child:
        ticks = proc_ticks(child)
        with spool.locked(job_id):
            record = spool.read(job_id)
            if record is None:
                os.kill(child, signal.SIGKILL)
                return 1
            record.supervisor_pid = child
            record.supervisor_ticks = ticks
            record.boot_id = boot_id()
            spool.write(record)
        os._exit(0)
    Supervisor(spool, job_id).run()
    sys.stdout.flush()
    os._exit(0)
