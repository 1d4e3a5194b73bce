"""Pure parsers of Slurm client output (squeue, sacct, scontrol, sbatch).

Each takes the literal text a command printed and returns records; they are
tested on literal output and then run against the real cluster. sacct is
read two ways: job states (``parse_sacct``, ``SACCT_FIELDS``, for queries)
and accounting (``parse_sacct_usage``, ``SACCT_USAGE_FIELDS``, for reports).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

from chain.backends.base import JobInfo, JobState, JobUsage

SQUEUE_FORMAT = "%i|%T|%r|%j|%S|%e"
# TimelimitRaw last: a running job's scheduled end (``JobInfo.end``) from the
# same look; output captured without it (6 fields) still parses.
SACCT_FIELDS = "JobIDRaw,State,ExitCode,JobName,Start,End,TimelimitRaw"
# Asked without -X: job lines carry state, exit code, times and TotalCPU
# (summed over the steps; with -X it prints 0); step lines carry MaxRSS.
# AllocCPUS last: output captured without it (10 fields) still parses.
SACCT_USAGE_FIELDS = "JobIDRaw,State,ExitCode,Submit,Start,End,ElapsedRaw,TotalCPU,NodeList,MaxRSS,AllocCPUS"
ACCOUNTING_DISABLED = "Slurm accounting storage is disabled"
SLURM_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")


def parse_slurm_timestamp(text: str) -> float | None:
    """``2026-11-29T08:01:02`` (local time) -> epoch; ``Unknown``/``N/A`` or
    any other shape -> None. (``fromisoformat`` after the shape check, not
    ``strptime``: its first call costs a runner job ~4 ms of its start.)"""
    value = text.strip()
    if not SLURM_TIMESTAMP.fullmatch(value):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """``3:0`` -> (3, None); ``0:15`` -> (0, 15)."""
    match = re.fullmatch(r"\s*(\d+):(\d+)\s*", text)
    if not match:
        return None, None
    code, sig = int(match.group(1)), int(match.group(2))
    return code, (sig or None)


def parse_squeue(text: str) -> dict[str, JobInfo]:
    """Output of ``squeue -h --states=all -o '%i|%T|%r|%j|%S|%e'``."""
    jobs: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 6 or not parts[0]:
            continue
        job_id, state, reason, name, start, end = parts[:6]
        jobs[job_id] = JobInfo(
            job_id=job_id,
            state=JobState.parse(state),
            reason="" if reason in {"None", "(null)"} else reason,
            name=name,
            start=parse_slurm_timestamp(start),
            end=parse_slurm_timestamp(end),
            source="squeue",
        )
    return jobs


def _sacct_lines(text: str, fields: int) -> Iterator[list[str]]:
    """The ``|``-separated lines of ``sacct -P`` with a job id and at least
    ``fields`` fields (step lines included: their id holds a dot)."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= fields and parts[0]:
            yield parts


def parse_sacct(text: str) -> dict[str, JobInfo]:
    """Output of ``sacct -X -n -P -o JobIDRaw,State,ExitCode,JobName,Start,End,TimelimitRaw``.

    A RUNNING job's ``end`` is its scheduled end, its start plus its limit
    (in minutes, as slurmctld computes it), when both are known; a job not
    started yet in accounting, an earlier run of a requeued one or one
    without a limit has none (the caller asks slurmctld then).

    sacct up to Slurm 24.11 reports an exit status of 128 or more minus 128
    (a job exiting 137 shows ``9:0``; 26.05 shows ``137:0``): the code is kept
    as printed, callers that need the real status read the runner's own record
    or scontrol.
    """
    jobs: dict[str, JobInfo] = {}
    for parts in _sacct_lines(text, 3):
        if "." in parts[0]:
            continue
        job_id, state_text, exit_text = parts[:3]
        name = parts[3] if len(parts) > 3 else ""
        start = parse_slurm_timestamp(parts[4]) if len(parts) > 4 else None
        end = parse_slurm_timestamp(parts[5]) if len(parts) > 5 else None
        state = JobState.parse(state_text)
        limit = parts[6].strip() if len(parts) > 6 else ""
        if state is JobState.RUNNING and start is not None and limit.isascii() and limit.isdigit() and len(limit) <= 9:
            end = start + 60 * int(limit)
        code, sig = parse_exit_code(exit_text)
        by = re.search(r"CANCELLED by (\S+)", state_text)
        jobs[job_id] = JobInfo(
            job_id=job_id,
            state=state,
            exit_code=code,
            signal=sig,
            name=name,
            start=start,
            end=end,
            cancelled_by=by.group(1) if by else None,
            source="sacct",
        )
    return jobs


def parse_cpu_time(text: str) -> float | None:
    """sacct's TotalCPU: ``MM:SS.mmm``, ``HH:MM:SS``, ``D-HH:MM:SS`` -> seconds."""
    m = re.fullmatch(r"\s*(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)\s*", text)
    if not m:
        return None
    days, hours, minutes, seconds = m.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def parse_size(text: str) -> int | None:
    """sacct's MaxRSS: ``3208K``, ``1.5G``, ``0`` -> bytes; empty -> None."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)([KMGTP]?)\s*", text)
    if not m:
        return None
    scale = 1024 ** " KMGTP".index(m.group(2) or " ")
    return int(float(m.group(1)) * scale)


def parse_sacct_usage(text: str) -> dict[str, JobUsage]:
    """Output of ``sacct -n -P -o SACCT_USAGE_FIELDS`` (with or without -X):
    one record per job line, with the largest MaxRSS of its step lines."""
    jobs: dict[str, JobUsage] = {}
    steps: dict[str, list[int]] = {}
    for parts in _sacct_lines(text, 10):
        job_id, state, exit_code, submit, start, end, elapsed, cpu, node, rss = parts[:10]
        alloc = parts[10].strip() if len(parts) > 10 else ""
        base, dot, _step = job_id.partition(".")
        size = parse_size(rss)
        if size is not None:
            steps.setdefault(base, []).append(size)
        if dot:
            continue
        jobs[job_id] = JobUsage(
            job_id=job_id,
            state=state,
            exit_code=exit_code,
            submit=parse_slurm_timestamp(submit),
            start=parse_slurm_timestamp(start),
            end=parse_slurm_timestamp(end),
            elapsed=float(elapsed) if elapsed.isdigit() else None,
            cpu=parse_cpu_time(cpu),
            node="" if node in {"None assigned", "(null)"} else node,
            alloc_cpus=int(alloc) if alloc.isdigit() else None,
        )
    for job_id, sizes in steps.items():
        if job_id in jobs:
            jobs[job_id].max_rss = max(sizes)
    return jobs


def sacct_error_reason(message: str) -> str:
    """The line of a failed sacct's output that says why: the
    accounting-disabled message, else the last line ("" for none)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if ACCOUNTING_DISABLED in line:
            return ACCOUNTING_DISABLED
    return lines[-1][:300] if lines else ""


def parse_scontrol(text: str) -> dict[str, JobInfo]:
    """Output of ``scontrol show job ID`` (multi-line or ``-o`` one-line)."""
    jobs: dict[str, JobInfo] = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        fields = dict(re.findall(r"(\w+)=(\S*)", block))
        job_id = fields.get("JobId")
        if not job_id:
            continue
        code, sig = parse_exit_code(fields.get("ExitCode", ""))
        reason = fields.get("Reason", "")
        jobs[job_id] = JobInfo(
            job_id=job_id,
            state=JobState.parse(fields.get("JobState", "")),
            exit_code=code,
            signal=sig,
            reason="" if reason == "None" else reason,
            name=fields.get("JobName", ""),
            start=parse_slurm_timestamp(fields.get("StartTime", "")),
            end=parse_slurm_timestamp(fields.get("EndTime", "")),
            source="scontrol",
            preempt_time=parse_slurm_timestamp(fields.get("PreemptTime", "")),
            restarts=int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else None,
        )
    return jobs


# a job whose own batch script still runs but that Slurm shows back in the
# queue (or ended by preemption) is being requeued
_TAKEN_BACK = frozenset({JobState.PREEMPTED, JobState.REQUEUED, JobState.PENDING})


def preempting(info: JobInfo, restarts: int = 0) -> bool:
    """Pure: the job, asked about from inside it after a SIGTERM, is being
    taken back: PreemptTime set (PreemptMode=CANCEL), Restarts above what it
    was when the asker started (``restarts``: REQUEUE sets no PreemptTime; at
    its SIGTERM scontrol shows COMPLETING with Restarts one up, measured on
    22.05, where a scancel shows COMPLETING with Restarts unchanged), or the
    job already shown preempted or back in the queue."""
    return (
        info.preempt_time is not None
        or info.state in _TAKEN_BACK
        or (info.restarts is not None and info.restarts > restarts)
    )


def parse_sbatch_parsable(text: str) -> str:
    """``sbatch --parsable`` prints ``ID`` or ``ID;cluster``."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    job_id = line.split(";")[0].strip()
    if not job_id.isdigit():
        raise ValueError(f"sbatch printed no job id: {text.strip()[:200]!r}")
    return job_id


NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a node name as sinfo takes it, never an option
# sinfo %T states a node is no use in: down, drained or draining, failed, or
# not responding (a trailing "*"); "idle", "allocated", "mixed" are up
_DOWN_STATES = ("down", "drain", "fail", "not_responding", "no_respond", "unknown")


def down_nodes(text: str) -> set[str]:
    """``sinfo -h -N -n NODES -o '%N|%T'``: the nodes shown down."""
    found = set()
    for line in text.splitlines():
        name, _, state = line.strip().partition("|")
        state = state.strip().lower()
        if name and (state.endswith("*") or state.startswith(_DOWN_STATES)):
            found.add(name)
    return found
