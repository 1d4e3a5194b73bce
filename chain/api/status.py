"""The status report: everything ``chain status`` shows, as typed-free JSON."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from chain.api.config import stored_settings
from chain.backends import make_backend
from chain.backends.base import Backend, JobInfo
from chain.core.model import ChainState
from chain.errors import ChainDirError, CheckpointError, SchedulerError
from chain.store import (
    ChainDir,
    ChainStatus,
    read_counter,
    tail_lines,
)

if TYPE_CHECKING:
    pass



def open_chain(chain_dir: str | os.PathLike[str]) -> tuple[ChainDir, ChainStatus]:
    chain_dir = Path(chain_dir)
    chain = ChainDir(chain_dir)
    if not chain_dir.exists():
        raise ChainDirError(f"no chain in {chain_dir} (directory does not exist)")
    status = chain.load_status()
    if status is None:
        raise ChainDirError(f"no chain in {chain_dir} (no state.json)")
    return chain, status


METRICS_WINDOW = 200  # rate, ETA and efficiency over the last runners: O(1) status on long chains


def status_report(chain_dir: Path, *, live: bool = True, history: int | None = None,
                  backend: Backend | None = None) -> dict[str, Any]:
    """Everything ``chain status`` shows, as one JSON-able dict (``backend``:
    as ``submit``; by default the chain's own)."""
    chain, status = open_chain(chain_dir)
    settings = stored_settings(chain)
    if history is None:
        runners = list(chain.iter_runners())
        total = len(runners)
        recent = runners[-METRICS_WINDOW:]
    else:
        recent, total = chain.recent_runners(max(history, METRICS_WINDOW))
        runners = recent[-history:] if history else []
    current = chain.read_record(status.runner_job_id) if status.runner_live and status.runner_job_id else None
    slurm: dict[str, JobInfo] = {}
    scheduler_error = ""
    if live and not status.state.ended:
        ids = [i for i in (status.submitter_job_id, status.runner_job_id if status.runner_live else "") if i]
        try:
            slurm = (backend or make_backend(status.backend or "slurm", chain_dir)).query(ids)
        except SchedulerError as exc:
            scheduler_error = str(exc)
    iteration = status.iteration
    try:
        iteration = read_counter(Path(status.workdir) / settings.ckpt_path)
    except CheckpointError:  # the status view must not fail on a bad counter
        pass

    from chain.reporting.metrics import chain_metrics

    metrics = chain_metrics(recent[-METRICS_WINDOW:] + ([current] if current else []), iteration, settings.max_iter,
                            time.time(), ended=status.state.ended)
    outputs = [str(p) for p in (chain.reports / "usage.csv", chain.reports / "summary.json",
                                chain.reports / "progress.png") if p.exists()]

    def job_state(job_id: str) -> str:
        info = slurm.get(job_id)
        return info.state.value if info else ""

    report: dict[str, Any] = {
        "chain_id": status.chain_id,
        "state": status.state.value,
        "reason": status.reason,
        "iteration": iteration,
        "max_iter": settings.max_iter,
        "backend": status.backend,
        "submitter_cycle": status.submitter_cycle,
        "submitter_job_id": status.submitter_job_id,
        "submitter_state": job_state(status.submitter_job_id),
        "runner_job_id": status.runner_job_id if status.runner_live else "",
        "runner_state": job_state(status.runner_job_id) if status.runner_live else "",
        "current_runner": current,
        "runners": [
            {k: r.get(k) for k in ("job_id", "seq", "state", "exit_code", "iter_before", "iter_after",
                                   "verdict", "reason", "start", "end")}
            for r in runners
        ],
        "runner_count": total,
        "hooks": status.hooks,
        "metrics": metrics,
        "outputs": outputs,
        "created": status.created,
        "updated": status.updated,
        "completed_at": status.completed_at or None,
        "workdir": status.workdir,
        "chain_dir": str(chain.root),
        "log": str(chain.log_file),
    }
    if scheduler_error:
        report["scheduler_error"] = scheduler_error
    report["nothing_driving"] = _nothing_driving(status, slurm, live and not scheduler_error)
    if status.state in (ChainState.FAILED, ChainState.STOPPED):
        report["failure"] = _failure_output(chain, runners[-1] if runners else chain.last_runner())
    return report


FAILURE_TAIL_LINES = 12


def _nothing_driving(status: ChainStatus, slurm: Mapping[str, JobInfo], asked: bool) -> bool:
    """A chain that is not over while no job of it can act: its submitter
    job ended, or the scheduler no longer knows it (``chain submit --resume``)."""
    if status.state.ended or not asked or not status.submitter_job_id:
        return False
    info = slurm.get(status.submitter_job_id)
    return info is None or not info.state.active


def _failure_output(chain: ChainDir, runner: dict[str, Any] | None) -> dict[str, Any] | None:
    """The failing runner's output: its path and last lines, for ``chain status``."""
    if not runner or not isinstance(runner.get("job_id"), str):
        return None
    path = chain.runner_output(runner["job_id"])
    return {"job_id": runner["job_id"], "log": str(path), "tail": tail_lines(path, FAILURE_TAIL_LINES)}
