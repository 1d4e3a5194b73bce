"""The local backend's on-disk spool: job records, their locks and name markers.

Layout of a spool directory (every file is plain text, safe to inspect)::

    counter                 last job id handed out, replaced atomically
    counter.lock            flock held while an id is handed out
    jobs/<id>.json          the job record (JobRecord), replaced atomically
    jobs/<id>.lock          flock held for every read-modify-write of the record
    jobs/<id>.sh            the batch script as submitted (sbatch copies it too)
    jobs/<id>.supervisor.log  the supervisor's own stderr (tracebacks only)
    names/<quoted name>/<id>  empty marker files: find_by_name and singleton

Readers never need the supervisor (``chain.backends.local.supervisor``): the
record is the truth, and a record whose supervisor vanished is finished as
NODE_FAIL by whoever looks at it next (``Spool.refresh``). A record is
checked like ``state.json`` when read (every field's type, its id, pids
above 1): a corrupt one is a one-line ``ChainDirError``. Process identity
(pid plus start time plus boot id, ``chain.primitives.procs``) guards
every signal: only a process chain started is ever signalled.

Every file of the spool is reached through ``chain.store.guarded`` from the
spool's parent (the chain directory): no link in the spool is followed, its
directories are real ones of this user's, and the counter, each record and
each batch script are replaced by the one atomic writer
(``chain.primitives.atomic.write_at``): a crash or a full disk mid-write
leaves the old file whole, never half a record or an empty counter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import getpass
import hashlib
import os
import signal
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.core.model import JobState
from chain.core.names import JOB_ID
from chain.core.retry import RetryPolicy
from chain.errors import ChainDirError, SchedulerError
from chain.primitives import atomic, procs
from chain.primitives.codec import RecordError, decode
from chain.store.guarded import ChainFileError, Guarded

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
    def from_json(cls, data: Any, job_id: str | None = None) -> JobRecord:
        """The record, every field checked against its type, pids above 1,
        and its id ``job_id`` when given (its file's); fields it does not
        know (a newer version's) are kept in ``extra``. Raises ``RecordError``."""
        if not isinstance(data, dict):
            raise RecordError("not a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        record = decode(cls, {k: v for k, v in data.items() if k in names})
        problem = _hostile(record, job_id)
        if problem:
            raise RecordError(problem)
        record.extra.update({k: v for k, v in data.items() if k not in names})
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


def is_job_id(text: str) -> bool:
    """A local job's id: what ``chain.core.names.JOB_ID`` takes, without an array task."""
    return JOB_ID.fullmatch(text) is not None and "_" not in text


def _hostile(record: JobRecord, job_id: str | None) -> str:
    """What in a decoded record chain never writes: an id that is not its
    file's, a pid that is no job's (0 or -N would signal the reader's own
    process group, 1 is init), a time that cannot be."""
    if not is_job_id(record.job_id) or (job_id is not None and record.job_id != job_id):
        return f"job_id {record.job_id!r} is not {job_id!r}" if job_id else f"bad job_id {record.job_id!r}"
    for name in ("supervisor_pid", "batch_pid"):
        pid = getattr(record, name)
        if pid is not None and pid <= 1:
            return f"bad {name} {pid!r}"
    for name in ("supervisor_ticks", "batch_ticks"):
        if (getattr(record, name) or 0) < 0:
            return f"bad {name} {getattr(record, name)!r}"
    if record.time_scale <= 0 or record.kill_wait < 0 or (record.time_limit or 0) < 0:
        return "bad time_scale, kill_wait or time_limit"
    return ""


def next_job_id(counter: str, taken: Iterable[str]) -> str:
    """Pure: the id after the last one handed out, ``counter`` (the counter
    file's text), and after every id ``taken`` (the records there are): a
    counter that is not an id (corrupt, or past 12 digits) is recovered from
    the records. Raises ``SchedulerError`` when 12 digits are used up."""
    text = counter.strip()
    last = int(text) if is_job_id(text) else 0
    highest = max((int(i) for i in taken if is_job_id(i)), default=0)
    job_id = str(max(last, highest) + 1)
    if not is_job_id(job_id):
        raise SchedulerError(f"local backend: job ids are used up ({job_id} has more than 12 digits)")
    return job_id


class Spool:
    """The directory holding every job's record; see the module docstring."""

    def __init__(self, root: Path, storage: RetryPolicy | None = None) -> None:
        self.root = root.absolute()
        self.storage = storage or RetryPolicy.for_storage()
        self.jobs = self.root / "jobs"
        self.names = self.root / "names"
        # from the parent: the spool directory itself is no link either
        self.guard = Guarded(self.root.parent)

    def _rel(self, *parts: str) -> str:
        """A file of the spool by its name in ``self.guard``."""
        return "/".join((self.root.name, *parts))

    def ensure(self) -> None:
        self.root.parent.mkdir(parents=True, exist_ok=True)
        self.guard.make_dirs(self._rel("jobs"), self._rel("names"))

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
        # a lock file of its own: the counter is replaced by a rename, and a
        # lock on a replaced file would not exclude the next process
        with self._flock(self._rel("counter.lock")):
            job_id = next_job_id(self._counter_text(), self.all_ids())
            self.guard.write(self._rel("counter"), f"{job_id}\n".encode())
            record = make(job_id)
            self.write(record)
            self.add_name(record.name, job_id)
        return record

    def _counter_text(self) -> str:
        """The counter file's text; "" when it is missing or not chain's (a
        link, a FIFO, too long): ``next_job_id`` recovers it from the records,
        and the write that follows replaces it."""
        try:
            return self.guard.read_bytes(self._rel("counter"), 64).decode("utf-8", "replace")
        except (FileNotFoundError, ChainFileError):
            return ""

    @contextlib.contextmanager
    def _flock(self, rel: str) -> Iterator[None]:
        fd = self.guard.open_append(rel)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file closes
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def locked(self, job_id: str) -> Iterator[None]:
        """Serialise read-modify-write of one record (client vs supervisor)."""
        with self._flock(self._rel("jobs", f"{job_id}.lock")):
            yield

    def read(self, job_id: str) -> JobRecord | None:
        """The job's record; None when there is none. A corrupt one is a
        one-line ``ChainDirError``, as a corrupt ``state.json`` is."""
        if not is_job_id(job_id):  # ids index files: refuse anything path-like
            return None
        path = self.record_path(job_id)
        try:
            data = self.guard.read_json(self._rel("jobs", f"{job_id}.json"), "local job record")
        except FileNotFoundError:
            return None
        try:
            return JobRecord.from_json(data, job_id)
        except RecordError as exc:
            raise ChainDirError(f"local job record {path} is corrupt: {exc}") from None

    def write(self, record: JobRecord) -> None:
        """Atomic (readers see the old or the new record, never half of one)
        and durable (fsync: records must survive a reboot); a file system that
        refuses writes for a while is ridden out (``RetryPolicy.for_storage``)."""
        rel, data = self._rel("jobs", f"{record.job_id}.json"), atomic.json_bytes(record.to_json())
        self.storage.call(lambda: self.guard.write(rel, data))

    def write_script(self, job_id: str, text: str) -> Path:
        """Keep the job's batch script (sbatch's own copy: later edits of the
        file do not reach the job), atomically: a half script never runs."""
        self.guard.write(self._rel("jobs", f"{job_id}.sh"), text.encode())
        return self.script_path(job_id)

    def open_log(self, job_id: str) -> int:
        """A descriptor appending to the supervisor's own log; the caller closes it."""
        return self.guard.open_append(self._rel("jobs", f"{job_id}.supervisor.log"))

    def name_dir(self, name: str) -> Path:
        quoted = urllib.parse.quote(name, safe="")
        if len(quoted) > 200:  # file names stop at 255 bytes
            quoted = quoted[:100] + "-" + hashlib.sha256(name.encode()).hexdigest()
        return self.names / quoted

    def add_name(self, name: str, job_id: str) -> None:
        self.guard.write(self._rel("names", self.name_dir(name).name, job_id), b"")

    def ids_by_name(self, name: str) -> list[str]:
        try:
            entries = os.listdir(self.name_dir(name))
        except FileNotFoundError:
            return []
        return sorted((e for e in entries if is_job_id(e)), key=int)

    def all_ids(self) -> list[str]:
        try:
            entries = os.listdir(self.jobs)
        except FileNotFoundError:
            return []
        ids = (e[: -len(".json")] for e in entries if e.endswith(".json"))
        return sorted((i for i in ids if is_job_id(i)), key=int)

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
        return not procs.running(record.supervisor_pid, record.supervisor_ticks, record.boot_id)


def kill_job_group(record: JobRecord, sig: signal.Signals, *, own_child: bool = False) -> str:
    """Signal the job's process group (its id is the batch shell's pid) if
    its leader is the batch shell recorded, alive or not yet reaped (while
    it holds its pid, the group id cannot be anyone else's); why not, ""
    when sent (``chain.primitives.procs``). ``own_child``: the caller is
    the supervisor, which has not reaped the batch shell."""
    if record.batch_pid is None:
        return "not started"
    return procs.send(record.batch_pid, record.batch_ticks, record.boot_id, sig, group=True, own_child=own_child)
