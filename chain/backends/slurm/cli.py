"""The Slurm command-line backend: sbatch, squeue, sacct, scontrol, scancel.

Works with any Slurm version whose clients are on PATH. Every call goes
through one retry policy; parsing is in ``slurm_parse``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Mapping, Sequence

from chain.backends.base import Backend, JobInfo, JobState
from chain.backends.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol,
    parse_squeue,
)
from chain.errors import SchedulerError
from chain.core.retry import RetryPolicy, TransientError, is_transient

Run = Callable[[Sequence[str], Mapping[str, str] | None, Path | None], "subprocess.CompletedProcess[str]"]

# Variables a job inherits from its own allocation that must not leak into a
# job it submits (sbatch/srun read some of them as defaults).
_KEEP = {"SLURM_CONF"}


def job_environment(base: Mapping[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in base.items()
        if k in _KEEP or not (k.startswith("SLURM_") or k.startswith("SBATCH_") or k.startswith("SRUN_"))
    }
    env.update(extra or {})
    return env


def _default_run(
    argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None
) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        list(argv), capture_output=True, text=True, env=dict(env) if env is not None else None,
        cwd=cwd, timeout=120, check=False,
    )


class SlurmCliBackend(Backend):
    """Talks to Slurm through its command-line clients."""

    name = "slurm"

    def __init__(self, retry: RetryPolicy | None = None, run: Run | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self._run = run or _default_run
        self.calls = 0  # Slurm client calls made (for the benchmark and tests)

    # --- plumbing ------------------------------------------------------------
    def _call(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        ok_errors: tuple[str, ...] = (),
    ) -> str:
        """Run one client; TransientError on a retryable failure."""
        self.calls += 1
        try:
            proc = self._run(argv, env, cwd)
        except FileNotFoundError:
            raise SchedulerError(f"{argv[0]} not found on PATH: is Slurm installed here?") from None
        except subprocess.TimeoutExpired:
            raise TransientError(f"{argv[0]} timed out") from None
        if proc.returncode == 0:
            return proc.stdout
        message = (proc.stderr or proc.stdout).strip().replace("\n", " ")
        if any(marker in message for marker in ok_errors):
            return ""
        if is_transient(message):
            raise TransientError(f"{argv[0]}: {message}")
        raise SchedulerError(f"{argv[0]} failed ({proc.returncode}): {message[:300]}")

    def _retrying(self, argv: Sequence[str], **kw: object) -> str:
        return self.retry.call(lambda: self._call(argv, **kw))  # type: ignore[arg-type]

    # --- Backend -------------------------------------------------------------
    def submit(
        self, script: Path, *, job_name: str, dependency: str | None = None,
        env: Mapping[str, str] | None = None, cwd: Path | None = None,
    ) -> str:
        argv = ["sbatch", "--parsable", f"--job-name={job_name}"]
        if dependency:
            argv.append(f"--dependency={dependency}")
        argv.append(str(script))
        job_env = job_environment(os.environ, env)

        def attempt() -> str:
            try:
                return parse_sbatch_parsable(self._call(argv, env=job_env, cwd=cwd))
            except TransientError:
                # A timed-out sbatch may still have queued the job.
                found = self.find_by_name(job_name)
                if found:
                    return found[-1]
                raise
            except ValueError as exc:
                raise SchedulerError(str(exc)) from None

        return self.retry.call(attempt)

    def query(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        ids = [j for j in job_ids if j]
        if not ids:
            return {}
        joined = ",".join(ids)
        found = parse_squeue(
            self._retrying(
                ["squeue", "-h", "--states=all", "-j", joined, "-o", SQUEUE_FORMAT],
                ok_errors=("Invalid job id",),
            )
        )
        # Ended jobs: the exit code comes from accounting, else scontrol.
        missing = [j for j in ids if j not in found or found[j].state.finished]
        if missing:
            found.update(self._finished(missing, found))
        return found

    def _finished(self, ids: list[str], live: dict[str, JobInfo]) -> dict[str, JobInfo]:
        result: dict[str, JobInfo] = {}
        sacct = ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", SACCT_FIELDS]
        try:
            # One try: while slurmctld still holds the job, scontrol answers
            # for a slurmdbd that is down; the retry budget is kept for jobs
            # only accounting knows (below).
            acct = parse_sacct(self._call(sacct))
            acct_ok = True
        except SchedulerError:
            acct, acct_ok = {}, False  # accounting disabled or down: scontrol below
        purged: list[str] = []
        for job_id in ids:
            info = acct.get(job_id)
            squeue_info = live.get(job_id)
            # Records reach slurmdbd asynchronously: a just-ended job may still
            # look running there. Trust squeue's finished state then.
            if info is not None and (squeue_info is None or info.state.finished):
                result[job_id] = info
                continue
            text = self._retrying(["scontrol", "show", "job", job_id], ok_errors=("Invalid job id",))
            shown = parse_scontrol(text).get(job_id)
            if shown is not None:
                result[job_id] = shown
            elif squeue_info is not None:
                result[job_id] = squeue_info
            else:
                purged.append(job_id)
        if purged and not acct_ok:
            try:
                acct = parse_sacct(self._retrying(
                    ["sacct", "-X", "-n", "-P", "-j", ",".join(purged), "-o", SACCT_FIELDS]))
            except SchedulerError:
                acct = {}
            result.update({j: acct[j] for j in purged if j in acct})
        return result

    def find_by_name(self, job_name: str) -> list[str]:
        text = self._retrying(["squeue", "-h", "--states=all", f"--name={job_name}", "-o", "%i"])
        return sorted((line.strip() for line in text.splitlines() if line.strip()), key=int)

    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        argv = ["scancel"]
        if signal:
            # scancel signals only the job steps unless told --batch.
            argv += [f"--signal={signal}"] + ([] if steps_only else ["--batch"])
        argv.append(job_id)
        self._retrying(argv, ok_errors=("Invalid job id", "already completing or completed"))

    def end_time(self, job_id: str) -> float | None:
        # One try: callers fall back on the configured limit, and a runner
        # must not spend its own time waiting out a slurmctld outage.
        info = parse_squeue(
            self._call(["squeue", "-h", "--states=all", "-j", job_id, "-o", SQUEUE_FORMAT],
                       ok_errors=("Invalid job id",))
        ).get(job_id)
        if info is None or info.state not in (JobState.RUNNING, JobState.COMPLETING):
            return None
        return info.end

    def available(self) -> bool:
        if shutil.which("sbatch") is None or shutil.which("squeue") is None:
            return False
        try:
            # One try: auto-detection must not wait out a retry budget.
            self._call(["sinfo", "-h", "-o", "%P"])
        except SchedulerError:
            return False
        return True
