"""Names the chain gives its jobs and scripts (no imports: cheap for status)."""

from __future__ import annotations

import re

# a Slurm job id (array tasks as 12_3): nothing else reaches a scheduler command
JOB_ID = re.compile(r"[0-9]{1,12}(_[0-9]{1,9})?")
# a runner's number or a submitter's cycle in a job name: ASCII digits, bounded (never a huge int())
_SEQ = re.compile(r"[0-9]{1,9}")

RUNNER_SCRIPT = "runner.sbatch"
MAIL_SCRIPT = "mail.sbatch"  # the end-of-chain mail job (--mail-user)
SUBMITTER_SCRIPT = "submitter.sbatch"


def submitter_job_name(chain_id: str, cycle: int) -> str:
    """Unique per submitter cycle (a timed-out sbatch is looked up by name);
    a successor waits with ``--dependency=afterany:<predecessor>``, so two
    submitters of one chain never run at once."""
    return f"{chain_id}.s{cycle}"


def runner_job_name(chain_id: str, seq: int) -> str:
    """Unique per runner, so a timed-out sbatch can be looked up by name."""
    return f"{chain_id}.r{seq}"


def runner_name(seq: int | None, job_id: str) -> str:
    """A runner as every view and its own log name it, by its sequence number
    and its job: ``runner 2 (job 3)`` (its log lines: ``chain runner 2 (job 3): ...``)."""
    return f"runner {seq} (job {job_id})" if seq is not None else f"runner (job {job_id})"


def runner_seq(job_name: str) -> int | None:
    """Sequence number from a runner job name ``<chain_id>.r<seq>``."""
    _head, sep, tail = job_name.rpartition(".r")
    return int(tail) if sep and _SEQ.fullmatch(tail) else None


def submitter_cycle(job_name: str) -> int | None:
    """Cycle number from a submitter job name ``<chain_id>.s<cycle>``."""
    _, sep, tail = job_name.rpartition(".s")
    return int(tail) if sep and _SEQ.fullmatch(tail) else None
