"""The chain directory: layout, atomic JSON records, the append-only logs.

Everything the chain keeps on disk is JSON written atomically (temp file,
fsync, rename) and validated on load; nothing is sourced or evaluated.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator

from chain.app import atomic as app_atomic
from chain.core.model import ChainState, counter_error
from chain.errors import ChainDirError, CheckpointError
from chain.core.names import runner_job_name

STATE_VERSION = 1


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file
    (``chain.app.atomic``'s write: temporary, fsync, rename, directory fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    app_atomic.write_json_atomic(path, data)


def read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ChainDirError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ChainDirError(f"{what} {path} is corrupt: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ChainDirError(f"{what} {path} is corrupt: {exc.msg} at line {exc.lineno}") from None


def tail_lines(path: Path, count: int, *, max_bytes: int = 16384) -> list[str]:
    """The last ``count`` lines of a text file, reading at most its last
    ``max_bytes`` (a runner's output can be large); [] if unreadable."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read(max_bytes)
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]  # the first one is cut
    return lines[-count:] if count else []


_SCALAR_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "str": str, "bool": bool}


@dataclass
class ChainStatus:
    """``state.json``: the chain's current state, owned by the submitter."""

    chain_id: str
    state: ChainState = ChainState.PENDING
    reason: str = ""
    created: float = 0.0
    updated: float = 0.0
    workdir: str = ""
    backend: str = ""
    submitter_cycle: int = 0
    submitter_job_id: str = ""
    runner_seq: int = 0  # sequence number of the current/last runner
    runner_job_id: str = ""  # "" while being submitted
    runner_live: bool = False  # the current runner has not been judged yet
    runner_submitted: float = 0.0
    iter_before: int = 0  # counter when the current runner was submitted
    no_progress: int = 0
    retries_used: int = 0
    iteration: int = 0  # last counter the submitter read
    next_job_id: str = ""  # lookahead: the next runner, queued behind the current one
    margin: int = 0  # adaptive runner margin (0: the configured one)
    worst_stop_to_exit: float = 0.0  # slowest stop-signal-to-exit of the app seen
    hooks: list[dict[str, Any]] = field(default_factory=list)
    completed_at: float = 0.0
    version: int = STATE_VERSION

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        return data

    @classmethod
    def from_json(cls, data: Any, path: Path) -> "ChainStatus":
        if not isinstance(data, dict):
            raise ChainDirError(f"state file {path} is corrupt: not a JSON object")
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue  # newer writer: ignore what we do not know
            kwargs[key] = value
        if not isinstance(kwargs.get("chain_id"), str) or not kwargs["chain_id"]:
            raise ChainDirError(f"state file {path} is corrupt: no chain_id")
        try:
            kwargs["state"] = ChainState(kwargs.get("state", "pending"))
        except ValueError:
            raise ChainDirError(f"state file {path} is corrupt: bad state {data.get('state')!r}") from None
        status = cls(**kwargs)
        for f in fields(cls):
            value = getattr(status, f.name)
            expected = _SCALAR_TYPES.get(str(f.type))
            if expected is not None and (not isinstance(value, expected) or (
                expected is int and isinstance(value, bool)
            )):
                raise ChainDirError(f"state file {path} is corrupt: {f.name} is {value!r}")
            if str(f.type).startswith("list[dict") and not (
                isinstance(value, list) and all(isinstance(item, dict) for item in value)
            ):
                raise ChainDirError(f"state file {path} is corrupt: {f.name} is not a list of objects")
        return status


@dataclass(frozen=True)
class ChainDir:
    """Paths of one chain directory. The app runs in ``workdir``."""

    root: Path

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
        write_json_atomic(self.state_file, status.to_json())

    # --- runner records ------------------------------------------------------
    def read_record(self, job_id: str) -> dict[str, Any] | None:
        """The runner's own record, or None if it wrote none (yet)."""
        try:
            data = read_json(self.record_file(job_id), "runner record")
        except (FileNotFoundError, ChainDirError):
            return None
        return data if isinstance(data, dict) else None

    def append_runner(self, entry: dict[str, Any]) -> None:
        """One line per judged runner; a single O_APPEND write."""
        line = json.dumps(entry, sort_keys=True) + "\n"
        fd = os.open(self.runners_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def judge_runner(self, entry: dict[str, Any]) -> None:
        """Append a runner's judgement once: a submitter restarted (or a
        cancel) after the line was written does not write it again."""
        last = self.last_runner()
        if not (last and last.get("job_id") == entry.get("job_id")):
            self.append_runner(entry)

    def iter_runners(self) -> Iterator[dict[str, Any]]:
        try:
            with self.runners_log.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a torn last line after a crash
                    if isinstance(entry, dict):
                        yield entry
        except FileNotFoundError:
            return

    def recent_runners(self, count: int) -> tuple[list[dict[str, Any]], int]:
        """The last ``count`` judged runners and how many there are in all,
        reading only the file's tail (``chain status`` on 10 000 runners)."""
        try:
            with self.runners_log.open("rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return [], 0
        total = data.count(b"\n")
        start = len(data)
        for _ in range(count + 1):  # step back over count lines (and a torn last one)
            start = data.rfind(b"\n", 0, max(0, start - 1)) if start > 0 else -1
            if start < 0:
                break
        entries: list[dict[str, Any]] = []
        for line in data[start + 1:].decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line after a crash
            if isinstance(entry, dict):
                entries.append(entry)
        return entries[-count:] if count else [], total

    def last_runner(self) -> dict[str, Any] | None:
        """Last judged runner."""
        entries, _ = self.recent_runners(1)
        return entries[-1] if entries else None

    def submit_runner(self, status: ChainStatus, counter: int, max_iter: int, now: float,
                      submit: Callable[[str], str], *, echo: bool = True) -> str:
        """Submit the chain's next runner with ``submit(job_name)``.

        The intention is saved first: a crash between here and sbatch is
        resolved on restart by looking the runner up by its unique name; and
        the runner, once started, checks that it is the chain's current one.
        """
        status.runner_seq += 1
        status.runner_job_id = ""
        status.runner_live = True
        status.iter_before = counter
        status.runner_submitted = now
        self.save_status(status)
        job_id = submit(runner_job_name(status.chain_id, status.runner_seq))
        status.runner_job_id = job_id
        self.save_status(status)
        self.add_worker_id(job_id)
        self.log(f"submitted runner {status.runner_seq}: job {job_id} (counter {counter}/{max_iter})", echo=echo)
        return job_id

    def add_worker_id(self, job_id: str) -> None:
        with self.worker_ids.open("a", encoding="utf-8") as fh:
            fh.write(f"{job_id}\n")

    def add_submitter_id(self, job_id: str) -> None:
        """Every submitter job of the chain (their allocation is a cost too)."""
        with self.submitter_ids.open("a", encoding="utf-8") as fh:
            fh.write(f"{job_id}\n")

    def log(self, message: str, *, echo: bool = True) -> None:
        """Timestamped line appended to chain.log (and echoed to stdout, which
        is the job's Slurm log inside a job)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        line = f"[{stamp}] {message}"
        if echo:
            print(line, flush=True)
        with self.log_file.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def runner_entry(status: ChainStatus, record: dict[str, Any], *, state: str, exit_code: Any,
                 iter_before: Any, iter_after: Any, verdict: str, reason: str, recorded: bool) -> dict[str, Any]:
    """The line ``runners.jsonl`` keeps for the chain's current runner."""
    return {
        "job_id": status.runner_job_id, "seq": status.runner_seq, "state": state, "exit_code": exit_code,
        "iter_before": iter_before, "iter_after": iter_after, "verdict": verdict, "reason": reason,
        "submitted": status.runner_submitted, "start": record.get("start"), "end": record.get("end"),
        "stop_to_exit": record.get("stop_to_exit"), "recorded": recorded,
    }


def read_counter(path: Path) -> int:
    """The checkpoint counter: missing file -> 0, anything but an integer -> error."""
    try:
        value = app_atomic.read_counter(path)
    except app_atomic.CounterFormatError as exc:
        raise counter_error(path, exc) from None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint counter {path}: {exc.strerror}") from None
    return 0 if value is None else value
