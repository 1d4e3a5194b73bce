"""The local backend's on-disk spool: job records, their locks and name markers.

Layout of a spool directory (every file is plain text, safe to inspect)::

    counter                 last job id handed out (read-modify-write under flock)
    jobs/<id>.json          the job record (JobRecord), replaced atomically
    jobs/<id>.lock          flock held for every read-modify-write of the record
    jobs/<id>.sh            the batch script as submitted (sbatch copies it too)
    jobs/<id>.supervisor.log  the supervisor's own stderr (tracebacks only)
    names/<quoted name>/<id>  empty marker files: find_by_name and singleton

Readers never need the supervisor (``chain.backends.local.supervisor``): the
record is the truth, and a record whose supervisor vanished is finished as
NODE_FAIL by whoever looks at it next (``Spool.refresh``). Process identity
(pid plus start time plus boot id) guards every signal against pid reuse.
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
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.core.model import JobState
from chain.core.retry import RetryPolicy
from chain.errors import SchedulerError
from chain.primitives import atomic

# A record still without a supervisor this long after submit lost its submitter
# mid-submit (submit() itself waits for the supervisor to register).
_UNREGISTERED_GRACE = 60.0
LOST_REASON = "supervisor lost"


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
    state: JobState = JobState.PENDING
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
        record.state = JobState.parse(str(known.get("state", "PENDING")))
        record.extra.update(extra)
        return record

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.state.value
        extra = data.pop("extra")
        data.update(extra)
        return data

    @property
    def active(self) -> bool:
        return self.state.active

    def finish(self, state: JobState, *, reason: str, exit_code: int = 0, sig: int = 0) -> None:
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

    def __init__(self, root: Path, storage: RetryPolicy | None = None) -> None:
        self.root = root.absolute()
        self.storage = storage or RetryPolicy.for_storage()
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
        """Atomic (readers see the old or the new record, never half of one)
        and durable (fsync: records must survive a reboot); a file system that
        refuses writes for a while is ridden out (``RetryPolicy.for_storage``)."""
        path, data = self.record_path(record.job_id), record.to_json()
        self.storage.call(lambda: atomic.write_json_atomic(path, data))

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
            record.finish(JobState.NODE_FAIL, reason=LOST_REASON)
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
