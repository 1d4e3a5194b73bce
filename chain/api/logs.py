"""``chain logs``: a runner's (or the submitter's) Slurm output, and
following it across runners until the chain ends. The output is read
through the chain directory's guard (``chain.store.guarded``): a link, a
FIFO or a device at its name is refused in one line, and only its end is
printed (``OUTPUT_TAIL``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chain.api.status import open_chain
from chain.core.names import runner_name
from chain.errors import ChainDirError, ChainError
from chain.modes import driver
from chain.store import ChainDir, ChainStatus
from chain.store.guarded import OUTPUT_TAIL, ChainFileError
from chain.store.view import ChainView

FOLLOW_CHUNK = 1 << 20  # bytes --follow prints at a time


@dataclass(frozen=True)
class LogSource:
    """Which job's output, and where it is (checked: ``ChainDir.runner_output``)."""

    what: str  # "runner 3 (job 42)", "submitter (job 41)"
    job_id: str
    path: Path

    def rel(self, chain: ChainDir) -> str:
        """Its name inside the chain directory, for the guarded reads."""
        return self.path.relative_to(chain.root).as_posix()


def read_output(chain: ChainDir, source: LogSource, max_bytes: int = OUTPUT_TAIL) -> str:
    """The job's output, its last ``max_bytes`` only (a first line says what
    was left out); a one-line error when there is none (yet)."""
    try:
        data, start = chain.guard.tail(source.rel(chain), max_bytes)
    except FileNotFoundError:
        raise ChainError(f"{source.path} does not exist (yet)") from None
    except ChainDirError:
        raise
    except OSError as exc:
        raise ChainError(f"cannot read {source.path}: {exc.strerror or exc}") from None
    text = data.decode("utf-8", "replace")
    if start:
        text = f"[... the first {start} bytes are not shown: the whole output is {source.path}]\n" + text
    return text


def runner_log(chain: ChainDir, status: ChainStatus, seq: int | None = None) -> LogSource:
    """Runner ``seq``'s output; without ``seq`` the current runner's, else the last one's."""
    if seq is None and status.runner_job_id:
        return LogSource(
            runner_name(status.runner_seq, status.runner_job_id),
            status.runner_job_id,
            chain.runner_output(status.runner_job_id),
        )
    if seq is not None and seq == status.runner_seq and status.runner_job_id:
        return runner_log(chain, status)
    for entry in reversed(list(chain.iter_runners())):
        if seq is None or entry.seq == seq:
            return LogSource(runner_name(entry.seq, entry.job_id), entry.job_id, chain.runner_output(entry.job_id))
    raise ChainDirError(
        f"chain {status.chain_id} has no runner {seq}"
        if seq is not None
        else f"chain {status.chain_id} has run no runner yet"
    )


def submitter_log(view: ChainView) -> LogSource:
    """The submitter job's output, or why there is none (its mode runs no submitter; not queued yet)."""
    chain, status = view.chain, view.status
    if not status.submitter_job_id:
        if why := driver(view.mode).no_submitter_log(status):
            raise ChainDirError(why)
        raise ChainDirError(f"chain {status.chain_id} has no submitter job yet")
    job = status.submitter_job_id
    return LogSource(f"submitter (job {job})", job, chain.submitter_output(job))


def follow(
    chain_dir: Path,
    write: Callable[[str], None],
    *,
    submitter: bool = False,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Print the current runner's (or submitter's) output as it grows,
    moving on to the next runner's, until the chain has ended and the last
    output is printed."""
    view = open_chain(chain_dir)
    chain = view.chain
    shown: dict[str, int] = {}  # its name in the chain directory -> bytes printed
    current = ""
    while True:
        view = dataclasses.replace(view, status=chain.load_status() or view.status)
        status = view.status
        ended = status.state.ended
        try:
            source = submitter_log(view) if submitter else runner_log(chain, status)
        except ChainFileError:
            raise  # its output is not a file of chain's: said, not waited on
        except ChainDirError:
            source = None  # no runner (or submitter) yet
        if source is not None:
            rel = source.rel(chain)
            if rel != current:
                if current:  # what the previous runner wrote since the last look
                    shown[current] = _print_new(chain, current, shown[current], write)
                current = rel
                write(f"==> {source.what}: {source.path} <==\n")
            shown[current] = _print_new(chain, current, shown.get(current, 0), write)
        if ended:
            return
        sleep(interval)


def _print_new(chain: ChainDir, rel: str, offset: int, write: Callable[[str], None]) -> int:
    """Print what ``rel`` holds past ``offset``, ``FOLLOW_CHUNK`` at a time
    (never all of it in memory); the new offset."""
    while True:
        try:
            data = chain.guard.read_span(rel, offset, FOLLOW_CHUNK)
        except FileNotFoundError:
            return offset
        full = len(data) == FOLLOW_CHUNK
        if full and b"\n" in data:
            data = data[: data.rindex(b"\n") + 1]  # a whole chunk ends at a line's end: no character cut in two
        if data:
            write(data.decode("utf-8", "replace"))
        offset += len(data)
        if not full:
            return offset
