"""The chain directory's layout and what lives in it: the status, the
runners' own records, the judged-runners log (read from its end), the job
id lists and ``chain.log``."""

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
from typing import Any

from chain.core.retry import RetryPolicy
from chain.errors import ChainDirError
from chain.store.jsonio import read_json, tail_lines, write_json_atomic
from chain.store.records import JudgedRunner, RunnerRecord
from chain.store.status import ChainStatus

LOCK_WAIT = 30.0  # seconds a chain command waits for another one on the same chain


@dataclass(frozen=True)
class ChainDir:
    """Paths of one chain directory. The app runs in ``workdir``.

    Its writes ride out a file system that refuses them for a while (full,
    read-only, immutable: ``storage``, bounded); then they fail."""

    root: Path
    storage: RetryPolicy = field(default_factory=RetryPolicy.for_storage, compare=False, repr=False)

    def _durably(self, what: Path, write: Callable[[], None]) -> None:
        self.storage.call(
            write, on_retry=lambda line: print(f"chain: writing {what}: {line}; retrying", file=sys.stderr, flush=True)
        )

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def settings_file(self) -> Path:
        return self.root / "settings.json"

    @property
    def log_file(self) -> Path:
        return self.root / "chain.log"

    @property
    def runners_log(self) -> Path:
        return self.root / "runners.jsonl"

    @property
    def worker_ids(self) -> Path:
        return self.root / "worker_ids.txt"

    @property
    def submitter_ids(self) -> Path:
        return self.root / "submitter_ids.txt"

    @property
    def records(self) -> Path:
        return self.root / "runners"

    @property
    def slurm_logs(self) -> Path:
        return self.root / "logs"

    @property
    def scripts(self) -> Path:
        return self.root / "scripts"

    @property
    def cancel_file(self) -> Path:
        return self.root / "cancel-requested"

    @property
    def reports(self) -> Path:
        return self.root / "report"

    def record_file(self, job_id: str) -> Path:
        return self.records / f"{job_id}.json"

    def runner_output(self, job_id: str) -> Path:
        """The runner job's Slurm output (``--output`` of templates/runner.sbatch.j2)."""
        return self.slurm_logs / f"runner-{job_id}.out"

    def create(self) -> None:
        try:
            for d in (self.root, self.records, self.slurm_logs, self.scripts):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainDirError(f"cannot create chain directory {self.root}: {exc.strerror}") from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise ChainDirError(f"chain directory {self.root} is not writable")

    # --- state -------------------------------------------------------------
    def load_status(self) -> ChainStatus | None:
        try:
            data = read_json(self.state_file, "state file")
        except FileNotFoundError:
            return None
        return ChainStatus.from_json(data, self.state_file)

    def save_status(self, status: ChainStatus) -> None:
        status.updated = time.time()
        data = status.to_json()
        self._durably(self.state_file, lambda: write_json_atomic(self.state_file, data))

    # --- runner records ------------------------------------------------------
    def read_record(self, job_id: str) -> dict[str, Any] | None:
        """The runner's own record, or None if it wrote none (yet)."""
        try:
            data = read_json(self.record_file(job_id), "runner record")
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
            give_up = clock() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if clock() >= give_up:
                        raise ChainDirError(
                            f"{self.root} is busy: another chain command is working on it; try again"
                        ) from None
                    sleep(0.1)
            yield
        finally:
            os.close(fd)  # releases the lock

    def runner_record(self, job_id: str, *, lenient: bool = False) -> RunnerRecord | None:
        """The runner's own record, typed; None if it wrote none (yet) or it
        is unreadable (``lenient``: ``RunnerRecord.from_json``'s)."""
        data = self.read_record(job_id)
        return None if data is None else RunnerRecord.from_json(data, lenient=lenient)

    def write_runner_record(self, record: RunnerRecord) -> None:
        path, data = self.record_file(record.job_id), record.to_json()
        self._durably(path, lambda: write_json_atomic(path, data))

    def append_runner(self, entry: JudgedRunner) -> None:
        """One line per judged runner; a single O_APPEND write."""
        line = json.dumps(entry.to_json(), sort_keys=True) + "\n"

        def append() -> None:
            fd = os.open(self.runners_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

        self._durably(self.runners_log, append)

    def judge_runner(self, entry: JudgedRunner) -> None:
        """Append a runner's judgement once: a submitter restarted (or a
        cancel) after the line was written does not write it again."""
        last = self.last_runner()
        if not (last and last.job_id == entry.job_id):
            self.append_runner(entry)

    def iter_runners(self) -> Iterator[JudgedRunner]:
        """Every judged runner, in order (a torn or foreign line is skipped)."""
        try:
            with self.runners_log.open(encoding="utf-8") as fh:
                for line in fh:
                    if (entry := JudgedRunner.from_line(line)) is not None:
                        yield entry
        except FileNotFoundError:
            return

    def recent_runners(self, count: int) -> tuple[list[JudgedRunner], int]:
        """The last ``count`` judged runners and how many there are in all:
        the entries from the file's tail only, the total by counting lines
        (``chain status`` on 10 000 runners)."""
        total = 0
        try:
            with self.runners_log.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 16), b""):
                    total += block.count(b"\n")
        except FileNotFoundError:
            return [], 0
        return self._tail_entries(count), total

    def last_runner(self) -> JudgedRunner | None:
        """Last judged runner, read from the end of ``runners.jsonl`` (the
        submitter asks at every judgement: never read the whole log)."""
        entries = self._tail_entries(1)
        return entries[-1] if entries else None

    def _tail_entries(self, count: int) -> list[JudgedRunner]:
        # one extra line: a torn last line after a crash is skipped
        lines = tail_lines(self.runners_log, count + 1, max_bytes=max(1 << 16, 4096 * (count + 1)))
        entries = [entry for line in lines if (entry := JudgedRunner.from_line(line)) is not None]
        return entries[-count:] if count else []

    def add_worker_id(self, job_id: str) -> None:
        self._durably(self.worker_ids, lambda: _append_line(self.worker_ids, job_id))

    def add_submitter_id(self, job_id: str) -> None:
        """Every submitter job of the chain (their allocation is a cost too)."""
        self._durably(self.submitter_ids, lambda: _append_line(self.submitter_ids, job_id))

    def log(self, message: str, *, echo: bool = True) -> None:
        """Timestamped line appended to chain.log (and echoed to stdout, which
        is the job's Slurm log inside a job)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        line = f"[{stamp}] {message}"
        if echo:
            print(line, flush=True)
        try:
            _append_line(self.log_file, line)
        except OSError as exc:  # a log line is not state: never fail the chain for it
            print(f"chain: cannot write {self.log_file}: {exc.strerror}: {line}", file=sys.stderr, flush=True)


def _append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
