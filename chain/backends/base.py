"""The scheduler interface every backend fills in.

The chain's workflow (what to submit, when to look, what an outcome means)
lives in the core; a backend only knows how to talk to one scheduler:
submit a rendered sbatch script, query jobs, find a job by name, cancel.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from chain.core.model import JobState

__all__ = ["Backend", "JobInfo", "JobState"]


@dataclass(frozen=True)
class JobInfo:
    """What a backend knows about one job.

    ``exit_code`` is the job's real exit status (0-255) when known: backends
    must undo sacct's "minus 128" for codes of 128 and above where they can
    tell (see the Slurm CLI backend). ``signal`` is the terminating signal, if
    any. ``cancelled_by`` is the uid/user that cancelled the job, if known.
    ``start``/``end`` are epoch seconds (``end`` is the scheduled end for a
    running job, the real end for a finished one); None when unknown.
    """

    job_id: str
    state: JobState
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    name: str = ""
    start: float | None = None
    end: float | None = None
    cancelled_by: str | None = None
    source: str = ""  # which query answered: squeue, sacct, scontrol, local


class Backend(abc.ABC):
    """One scheduler. Implementations: slurm_cli, local, pyslurm."""

    name: str = "abstract"
    # True when a query costs no scheduler RPC (the local backend reads files),
    # so the submitter may look often without burdening anyone.
    cheap_queries: bool = False

    @abc.abstractmethod
    def submit(
        self,
        script: Path,
        *,
        job_name: str,
        dependency: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> str:
        """Submit a rendered sbatch script; return the job id.

        ``job_name`` overrides the script's ``#SBATCH --job-name`` and must be
        unique per submission where the caller relies on ``find_by_name``.
        ``dependency`` is an sbatch dependency expression such as
        ``singleton`` or ``afterany:123``. ``env`` is added to the job's
        environment on top of the caller's.
        """

    @abc.abstractmethod
    def query(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        """State of each job; ids the scheduler no longer knows are absent."""

    @abc.abstractmethod
    def find_by_name(self, job_name: str) -> list[str]:
        """Ids of jobs (any state the scheduler still remembers) with this name."""

    @abc.abstractmethod
    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        """Cancel a job, or only send it ``signal`` (e.g. ``TERM``) if given:
        to the batch script, or with ``steps_only`` to its job steps (srun's
        tasks: srun itself turns a SIGTERM into killing the step)."""

    @abc.abstractmethod
    def end_time(self, job_id: str) -> float | None:
        """Scheduled end (epoch seconds) of a running job, None if unknown."""

    def available(self) -> bool:
        """True when the scheduler answers (used by ``--backend auto``)."""
        return True
