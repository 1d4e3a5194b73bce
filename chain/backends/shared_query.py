"""One scheduler query shared by the processes that watch chains on a node.

``chain submit --wait``, ``chain status --watch``, ``Chain.wait`` and a
sweep's waits look at their chains' jobs every few seconds. Each look was a
query of slurmctld (``squeue``: 2-3 RPCs); a sweep watched from a login node
by many such processes multiplied them. ``SharedQuery.query`` answers from
the last answer while it is fresh (``fresh_for`` seconds) and covers the
jobs asked; otherwise it asks the scheduler once, for these jobs and the
still-active ones other watchers asked about, and leaves the answer in a
file of the user's own (``cache_dir``), under a lock, for the others.

The file is a cache and nothing more: a missing, torn, hostile or foreign
one (a link, a FIFO, another user's directory) is ignored and the scheduler
asked; a chain's state never comes from it, only a job's as recently seen.
Nothing is written under a chain directory (a read command never writes
there).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.backends.base import Backend, JobInfo
from chain.errors import ChainError
from chain.primitives.codec import RecordError, decode, encode
from chain.store.jsonio import read_json, write_json

LOCK_FILE = "jobs.lock"
KEEP_ASKING = 60.0  # seconds an active job another watcher asked about is asked about again
LOCK_WAIT = 2.0  # seconds to wait for another process's query; then ask alone
WATCH_FRESH_FOR = 10.0  # how old a job state the views that look every few seconds show


@dataclass(frozen=True)
class Answer:
    """One query's answer: when it was taken, of which scheduler
    (``Backend.query_scope``), what was asked, what was found (a job asked
    and not found is one the scheduler no longer knows)."""

    taken: float
    scope: str
    asked: list[str]
    jobs: dict[str, JobInfo] = field(default_factory=dict)

    def covers(self, ids: frozenset[str], scope: str, now: float, fresh_for: float) -> bool:
        return self.scope == scope and 0.0 <= now - self.taken < fresh_for and ids <= set(self.asked)

    def still_asked(self, now: float) -> set[str]:
        """Jobs worth asking about again with another watcher's: active ones, lately asked."""
        if not 0.0 <= now - self.taken < KEEP_ASKING:
            return set()
        return {j for j, info in self.jobs.items() if info.state.active}


def cache_dir(uid: int | None = None, environ: dict[str, str] | None = None) -> Path | None:
    """The user's private directory for the shared answer: ``$XDG_RUNTIME_DIR/chain``
    when that is set, else ``/tmp/chain-<uid>``; made 0700, and None (no sharing)
    unless it is a real directory of this user's that no one else can write."""
    uid = os.getuid() if uid is None else uid
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR", "")
    path = Path(runtime) / "chain" if runtime.startswith("/") else Path(f"/tmp/chain-{uid}")
    with contextlib.suppress(OSError):
        path.mkdir(mode=0o700, exist_ok=True)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o022:
        return None
    if info.st_mode & 0o077:  # ours, but readable by others: job states are the user's alone
        try:
            os.chmod(path, 0o700)
        except OSError:
            return None
    return path


@dataclass
class SharedQuery:
    """``Backend.query`` through a recent answer, shared through ``directory``
    (None, or a backend with no ``query_scope``: this process's answers
    only). ``clock`` is wall time: the file is read by other processes."""

    backend: Backend
    directory: Path | None = None
    fresh_for: float = 10.0
    clock: Callable[[], float] = time.time
    last: Answer | None = None

    def query(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """The jobs' states, as ``Backend.query`` gives them (exit codes included)."""
        ids = frozenset(j for j in job_ids if j)
        if not ids:
            return {}
        scope = self.backend.query_scope()
        if self.last is None or not self.last.covers(ids, scope, self.clock(), self.fresh_for):
            where = self.directory if scope else None
            self.last = self._shared(ids, scope, where) if where is not None else self._ask(ids, scope, None)
        return {j: self.last.jobs[j] for j in ids if j in self.last.jobs}

    def _shared(self, ids: frozenset[str], scope: str, directory: Path) -> Answer:
        cache = directory / f"jobs-{_file_part(scope)}.json"
        with _locked(directory / LOCK_FILE) as held:
            earlier = _read(cache) if held else None
            if earlier is not None and earlier.covers(ids, scope, self.clock(), self.fresh_for):
                return earlier
            answer = self._ask(ids, scope, earlier)
            if held:
                with contextlib.suppress(OSError, ChainError):
                    _write(cache, answer)
            return answer

    def _ask(self, ids: frozenset[str], scope: str, earlier: Answer | None) -> Answer:
        now = self.clock()
        others = earlier.still_asked(now) if earlier is not None and earlier.scope == scope else set()
        asked = sorted(ids | others)
        return Answer(now, scope, asked, self.backend.query(asked))


@dataclass(frozen=True)
class _Stored:
    """The file's shape: an ``Answer`` with each job's state as a JSON object."""

    taken: float
    scope: str
    asked: list[str]
    jobs: list[dict[str, Any]]


def _file_part(scope: str) -> str:
    """A scope as part of a file name: its letters, digits and ``._-`` (no hash: the status path imports no hashlib)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", scope).strip("_")[:120] or "_"


def _write(path: Path, answer: Answer) -> None:
    jobs = [encode(info, skip_none=True) for info in answer.jobs.values()]
    write_json(path, encode(_Stored(answer.taken, answer.scope, answer.asked, jobs)))


def _read(path: Path) -> Answer | None:
    """The shared answer, or None when there is none that can be trusted to be one."""
    try:
        stored = decode(_Stored, read_json(path, "shared job states"))
        jobs = [decode(JobInfo, job) for job in stored.jobs]
    except (OSError, ChainError, RecordError):
        return None
    return Answer(stored.taken, stored.scope, stored.asked, {info.job_id: info for info in jobs})


@contextlib.contextmanager
def _locked(path: Path, wait: float = LOCK_WAIT) -> Iterator[bool]:
    """Hold the lock file (never a link or a FIFO); True when held. Not held
    in ``wait`` seconds, or not a regular file of ours: False, and the caller
    asks without sharing."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError:
        yield False
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            yield False
            return
        give_up = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= give_up:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(fd)
