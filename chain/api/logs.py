"""``chain logs``: a runner's (or the submitter's) Slurm output, and
following it across runners until the chain ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chain.api.config import stored_settings
from chain.api.status import open_chain
from chain.core.names import runner_name
from chain.core.settings import Mode
from chain.errors import ChainDirError
from chain.store import ChainDir, ChainStatus


@dataclass(frozen=True)
class LogSource:
    """Which job's output, and where it is."""

    what: str  # "runner 3 (job 42)", "submitter (job 41)"
    job_id: str
    path: Path


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


def submitter_log(chain: ChainDir, status: ChainStatus) -> LogSource:
    if not status.submitter_job_id:
        if stored_settings(chain).mode is Mode.RELAY:
            raise ChainDirError(
                f"chain {status.chain_id} runs in relay mode: it has no submitter job "
                "(the runners' output says what each judged: chain logs --runner N)"
            )
        raise ChainDirError(f"chain {status.chain_id} has no submitter job yet")
    job = status.submitter_job_id
    return LogSource(f"submitter (job {job})", job, chain.slurm_logs / f"submitter-{job}.out")


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
    chain, status = open_chain(chain_dir)
    shown: dict[str, int] = {}  # path -> bytes printed
    current = ""
    while True:
        status = chain.load_status() or status
        ended = status.state.ended
        try:
            source = submitter_log(chain, status) if submitter else runner_log(chain, status)
        except ChainDirError:
            source = None
        if source is not None:
            if str(source.path) != current:
                if current:  # what the previous runner wrote since the last look
                    shown[current] = _print_new(Path(current), shown[current], write)
                current = str(source.path)
                write(f"==> {source.what}: {source.path} <==\n")
            shown[current] = _print_new(source.path, shown.get(current, 0), write)
        if ended:
            return
        sleep(interval)


def _print_new(path: Path, offset: int, write: Callable[[str], None]) -> int:
    """Print what ``path`` holds past ``offset``; the new offset."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return offset
    if data:
        write(data.decode("utf-8", "replace"))
    return offset + len(data)
