"""The chain directory's layout and what lives in it: the status, the
runners' own records, the judged-runners log (read from its end), the job
id lists, ``chain.log``, the job scripts, the jobs' output and the report.

Its reads and writes go through ``chain.store.guarded``, by descriptor: no
link followed, regular files only, each kind read up to its cap. A path it
hands out (``state_file``, ``scripts``, ...) has just been checked the same
way (a directory a real one of the user's, a file, when there, a regular
one), for the callers that open it themselves."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from chain.core.records import JudgedRunner, RunnerRecord
from chain.core.retry import RetryPolicy
from chain.core.status import ChainStatus
from chain.errors import ChainDirError
from chain.primitives import safeio
from chain.primitives.atomic import json_bytes
from chain.store.guarded import IDS_CAP, ChainFileError, Guarded, refusals

LOCK_WAIT = 30.0  # seconds a chain command waits for another one on the same chain
# seconds a save of state.json waits for another one: saves take milliseconds,
# so this is only ever reached beside a process stopped while it held the lock
SAVE_WAIT = 300.0

# the names of its files and directories, relative to it
STATE, SETTINGS, LOG, RUNNERS_LOG = "state.json", "settings.json", "chain.log", "runners.jsonl"
WORKER_IDS, SUBMITTER_IDS, CANCEL = "worker_ids.txt", "submitter_ids.txt", "cancel-requested"
RECORDS, LOGS, SCRIPTS, REPORTS = "runners", "logs", "scripts", "report"


@dataclass(frozen=True)
class ChainDir:
    """Paths of one chain directory. The app runs in ``workdir``.

    Its writes ride out a file system that refuses them for a while (full,
    read-only, immutable: ``storage``, bounded); then they fail."""

    root: Path
    storage: RetryPolicy = field(default_factory=RetryPolicy.for_storage, compare=False, repr=False)

    @property
    def guard(self) -> Guarded:
        """The one way into the directory's files (``chain.store.guarded``)."""
        return Guarded(self.root)

    def _durably(self, rel: str, write: Callable[[], None]) -> None:
        what = self.root / rel
        self.storage.call(
            write, on_retry=lambda line: print(f"chain: writing {what}: {line}; retrying", file=sys.stderr, flush=True)
        )

    @property
    def state_file(self) -> Path:
        return self.guard.checked(STATE)

    @property
    def settings_file(self) -> Path:
        return self.guard.checked(SETTINGS)

    @property
    def log_file(self) -> Path:
        return self.guard.checked(LOG)

    @property
    def runners_log(self) -> Path:
        return self.guard.checked(RUNNERS_LOG)

    @property
    def worker_ids(self) -> Path:
        return self.guard.checked(WORKER_IDS)

    @property
    def submitter_ids(self) -> Path:
        return self.guard.checked(SUBMITTER_IDS)

    @property
    def records(self) -> Path:
        return self.guard.checked(RECORDS, directory=True)

    @property
    def slurm_logs(self) -> Path:
        return self.guard.checked(LOGS, directory=True)

    @property
    def scripts(self) -> Path:
        return self.guard.checked(SCRIPTS, directory=True)

    @property
    def cancel_file(self) -> Path:
        return self.guard.checked(CANCEL)

    @property
    def reports(self) -> Path:
        return self.guard.checked(REPORTS, directory=True)

    def record_file(self, job_id: str) -> Path:
        return self.guard.checked(_record(job_id))

    def runner_output(self, job_id: str) -> Path:
        """The runner job's Slurm output (``--output`` of templates/runner.sbatch.j2)."""
        return self.guard.checked(f"{LOGS}/runner-{job_id}.out")

    def submitter_output(self, job_id: str) -> Path:
        """The submitter job's Slurm output (``--output`` of templates/submitter.sbatch.j2)."""
        return self.guard.checked(f"{LOGS}/submitter-{job_id}.out")

    def create(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.guard.make_dirs(RECORDS, LOGS, SCRIPTS)
        except ChainFileError:
            raise
        except OSError as exc:
            raise ChainDirError(f"cannot create chain directory {self.root}: {exc.strerror}") from None
        self.guard.checked(REPORTS, directory=True)  # made by the report, never through a link
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise ChainDirError(f"chain directory {self.root} is not writable")

    # --- state -------------------------------------------------------------
    def load_status(self) -> ChainStatus | None:
        try:
            data = self.guard.read_json(STATE, "state file")
        except FileNotFoundError:
            return None
        return ChainStatus.from_json(data, self.root / STATE)

    def save_status(self, status: ChainStatus) -> None:
        """Write ``status`` as it is: the executor's compare-and-save
        (``saving``) is the only caller."""
        status.updated = time.time()
        data = json_bytes(status.to_json())
        self._durably(STATE, lambda: self.guard.write(STATE, data))

    @contextlib.contextmanager
    def saving(
        self,
        *,
        wait: float = SAVE_WAIT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[None]:
        """Hold the lock of ``state.json``'s writers (``flock`` on the chain
        directory itself: one per chain, so a sweep's chains never wait for
        each other) around a re-read, apply and save. Not the commands'
        ``locked``: a save inside a command's check-then-act takes both."""
        with refusals(self.root):
            fd = safeio.open_dir(self.root)
        try:
            _flock(fd, wait, clock, sleep, f"{self.root}: state.json stayed locked by another process for {wait:.0f} s")
            yield  # what the caller's block raises is its own, not the lock's
        finally:
            os.close(fd)

    def read_settings(self) -> Any:
        """``settings.json`` as JSON (``api.config.stored_settings`` checks it). FileNotFoundError when missing."""
        return self.guard.read_json(SETTINGS, "settings file")

    def write_settings(self, data: dict[str, Any]) -> None:
        self._durably(SETTINGS, lambda: self.guard.write(SETTINGS, json_bytes(data)))

    # --- runner records ------------------------------------------------------
    def read_record(self, job_id: str) -> dict[str, Any] | None:
        """The runner's own record, or None if it wrote none (yet)."""
        try:
            data = self.guard.read_json(_record(job_id), "runner record")
        except (FileNotFoundError, ChainDirError):
            return None
        return data if isinstance(data, dict) else None

    @contextlib.contextmanager
    def locked(
        self,
        *,
        wait: float = LOCK_WAIT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[None]:
        """Hold the chain directory's lock around a check-then-act (submit,
        resume, cancel): a second command waits up to ``wait`` seconds, then
        is refused with one line. The lock is ``flock`` on the directory that
        holds the chain directory (it may not exist yet, and no lock file is
        left behind; the nearest existing one while it is still to be made)."""
        parent = self.root.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent  # the chain directory is made, with its parents, later
        try:
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ChainDirError(f"cannot create chain directory {self.root}: {exc.strerror}") from None
        try:
            _flock(fd, wait, clock, sleep, f"{self.root} is busy: another chain command is working on it; try again")
            yield
        finally:
            os.close(fd)  # releases the lock

    def runner_record(self, job_id: str, *, lenient: bool = False) -> RunnerRecord | None:
        """The runner's own record, typed; None if it wrote none (yet) or it
        is unreadable (``lenient``: ``RunnerRecord.from_json``'s)."""
        data = self.read_record(job_id)
        return None if data is None else RunnerRecord.from_json(data, lenient=lenient)

    def write_runner_record(self, record: RunnerRecord) -> None:
        rel, data = _record(record.job_id), json_bytes(record.to_json())
        self._durably(rel, lambda: self.guard.write(rel, data))

    def append_runner(self, entry: JudgedRunner) -> None:
        """One line per judged runner; a single O_APPEND write."""
        line = (json.dumps(entry.to_json(), sort_keys=True) + "\n").encode()
        self._durably(RUNNERS_LOG, lambda: self.guard.append(RUNNERS_LOG, line, mode=0o644, durable=True))

    def judge_runner(self, entry: JudgedRunner) -> None:
        """Append a runner's judgement once: a submitter restarted (or a
        cancel) after the line was written does not write it again."""
        last = self.last_runner()
        if not (last and last.job_id == entry.job_id):
            self.append_runner(entry)

    def iter_runners(self) -> Iterator[JudgedRunner]:
        """Every judged runner, in order (a torn, foreign or over-long line is skipped)."""
        for line in self.guard.lines(RUNNERS_LOG):
            if (entry := JudgedRunner.from_line(line)) is not None:
                yield entry

    def recent_runners(self, count: int) -> tuple[list[JudgedRunner], int]:
        """The last ``count`` judged runners and how many there are in all:
        the entries from the file's tail only, the total by counting lines
        (``chain status`` on 10 000 runners)."""
        total = self.guard.count_lines(RUNNERS_LOG)
        return self._tail_entries(count), total

    def last_runner(self) -> JudgedRunner | None:
        """Last judged runner, read from the end of ``runners.jsonl`` (the
        submitter asks at every judgement: never read the whole log)."""
        entries = self._tail_entries(1)
        return entries[-1] if entries else None

    def _tail_entries(self, count: int) -> list[JudgedRunner]:
        # one extra line: a torn last line after a crash is skipped
        lines = self.guard.tail_lines(RUNNERS_LOG, count + 1, max_bytes=max(1 << 16, 4096 * (count + 1)))
        entries = [entry for line in lines if (entry := JudgedRunner.from_line(line)) is not None]
        return entries[-count:] if count else []

    # --- job ids -------------------------------------------------------------
    def add_worker_id(self, job_id: str) -> None:
        self._durably(WORKER_IDS, lambda: self.guard.append(WORKER_IDS, f"{job_id}\n".encode()))

    def add_submitter_id(self, job_id: str) -> None:
        """Every submitter job of the chain (their allocation is a cost too)."""
        self._durably(SUBMITTER_IDS, lambda: self.guard.append(SUBMITTER_IDS, f"{job_id}\n".encode()))

    def worker_id_list(self) -> list[str]:
        """The runner jobs in ``worker_ids.txt``, in order ([] when there is none)."""
        return self._ids(WORKER_IDS)

    def submitter_id_list(self) -> list[str]:
        """The submitter jobs in ``submitter_ids.txt``, in order ([] when there is none)."""
        return self._ids(SUBMITTER_IDS)

    def _ids(self, rel: str) -> list[str]:
        try:
            text = self.guard.read_bytes(rel, IDS_CAP).decode("utf-8", "replace")
        except FileNotFoundError:
            return []
        return [line.strip() for line in text.splitlines() if line.strip()]

    # --- chain.log, cancel, scripts, output, report ----------------------------------
    def log(self, message: str, *, echo: bool = True) -> None:
        """Timestamped line appended to chain.log (and echoed to stdout, which
        is the job's Slurm log inside a job)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        line = f"[{stamp}] {message}"
        if echo:
            print(line, flush=True)
        try:
            self.guard.append(LOG, f"{line}\n".encode())
        except OSError as exc:  # a log line is not state: never fail the chain for it
            why = f"cannot write {self.root / LOG}: {exc.strerror}" if exc.strerror else str(exc)
            print(f"chain: {why}; not logged: {line}", file=sys.stderr, flush=True)

    def request_cancel(self) -> None:
        """Leave the mark ``chain cancel`` leaves: the jobs that see it stop."""
        self._durably(CANCEL, lambda: self.guard.write(CANCEL, f"{time.time()}\n".encode()))

    def cancel_requested(self) -> bool:
        return self.guard.exists(CANCEL)

    def clear_cancel(self) -> None:
        self.guard.unlink(CANCEL)

    def script(self, name: str) -> Path:
        """A job script to submit: checked, with the ``logs`` directory its
        output goes to (Slurm opens it by name, following links)."""
        self.guard.checked(LOGS, directory=True)
        return self.guard.checked(f"{SCRIPTS}/{name}")

    def write_script(self, name: str, text: str) -> Path:
        """A job script: executable by its owner only, written atomically."""
        self.guard.write(f"{SCRIPTS}/{name}", text.encode(), mode=0o700)
        return self.root / SCRIPTS / name

    def remove_script(self, name: str) -> None:
        self.guard.unlink(f"{SCRIPTS}/{name}")

    def open_output(self, name: str) -> IO[str]:
        """``logs/<name>`` opened to append (a hook's or a notify command's output)."""
        return os.fdopen(self.guard.open_append(f"{LOGS}/{name}"), "a", encoding="utf-8")

    def write_report(self, name: str, data: bytes) -> Path:
        """``report/<name>`` replaced atomically (``report/`` made when missing)."""
        self.guard.write(f"{REPORTS}/{name}", data)
        return self.root / REPORTS / name


def _flock(fd: int, wait: float, clock: Callable[[], float], sleep: Callable[[float], None], busy: str) -> None:
    """``flock`` ``fd`` exclusively, trying for ``wait`` seconds; then ``ChainDirError(busy)``."""
    give_up = clock() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if clock() >= give_up:
                raise ChainDirError(busy) from None
            sleep(0.05)


def _record(job_id: str) -> str:
    return f"{RECORDS}/{job_id}.json"
