"""The Slurm command-line backend: sbatch, squeue, sacct, scontrol, scancel.

Works with any Slurm version whose clients are on PATH. Every call goes
through one retry policy (``chain.core.retry``); parsing is in ``parse``.
"""

from __future__ import annotations

import functools
import getpass
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from chain.backends.base import (
    AccountingUnavailable,
    Backend,
    JobInfo,
    JobState,
    JobUsage,
    submit_idempotently,
)
from chain.backends.slurm.parse import (
    NODE_NAME,
    SACCT_FIELDS,
    SACCT_USAGE_FIELDS,
    SQUEUE_FORMAT,
    down_nodes,
    parse_sacct,
    parse_sacct_usage,
    parse_sbatch_parsable,
    parse_scontrol,
    parse_squeue,
    preempting,
    sacct_error_reason,
)
from chain.core.names import JOB_ID
from chain.core.retry import RetryPolicy, TransientError, is_transient
from chain.errors import SchedulerError

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobLimits

SACCT_BATCH = 1000  # job ids per sacct usage call (a long chain's command line stays short)

Run = Callable[[Sequence[str], Mapping[str, str] | None, Path | None], "subprocess.CompletedProcess[str]"]
# a client started now, its outcome given when the returned function is called
Start = Callable[[Sequence[str]], Callable[[], "subprocess.CompletedProcess[str]"]]
CLIENT_TIMEOUT = 120.0  # seconds a client may take before it counts as timed out (transient)

# Variables a job inherits from its own allocation that must not leak into a
# job it submits (sbatch/srun read some of them as defaults).
_KEEP = {"SLURM_CONF"}


def job_environment(base: Mapping[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k in _KEEP or not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env.update(extra or {})
    return env


class ClientError(SchedulerError):
    """A Slurm client failed for a reason that is not transient; ``output``
    is what it printed (stderr, else stdout), ``returncode`` its status."""

    def __init__(self, program: str, returncode: int, output: str) -> None:
        one_line = output.replace("\n", " ")
        super().__init__(f"{program} failed ({returncode}): {one_line[:300]}")
        self.returncode = returncode
        self.output = output


def _default_run(
    argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )


def _default_start(argv: Sequence[str]) -> Callable[[], subprocess.CompletedProcess[str]]:
    """``_default_run`` in two steps: the client runs from now on, its outcome
    (the same, a timeout included) is waited for when asked."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + CLIENT_TIMEOUT

    @functools.cache
    def outcome() -> subprocess.CompletedProcess[str]:
        try:
            out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except BaseException:  # a timeout, or an interrupt while waiting: the client goes too, as under run()
            proc.kill()
            proc.wait()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    return outcome


class SlurmCliBackend(Backend):
    """Talks to Slurm through its command-line clients."""

    name = "slurm"
    usage_source = "sacct"

    def __init__(self, retry: RetryPolicy | None = None, run: Run | None = None) -> None:
        """``run``: how a client is run (tests give canned clients); a client
        started to be answered later (``accounted_later``) is a real one
        started at once, or with a given ``run``, run when its answer is wanted."""
        self.retry = retry or RetryPolicy()
        self._run = run or _default_run
        self._start: Start = _default_start if run is None else _deferred(run)

    # --- plumbing ------------------------------------------------------------
    def _once(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ok_errors: tuple[str, ...] = (),
    ) -> str:
        """Run one client once; TransientError on a retryable failure."""
        return self._outcome(argv, lambda: self._run(argv, env, cwd), ok_errors)

    def _outcome(
        self,
        argv: Sequence[str],
        run: Callable[[], subprocess.CompletedProcess[str]],
        ok_errors: tuple[str, ...] = (),
    ) -> str:
        """A client's output once ``run`` gives its outcome (``_once``)."""
        try:
            proc = run()
        except FileNotFoundError:
            raise SchedulerError(f"{argv[0]} not found on PATH: is Slurm installed here?") from None
        except subprocess.TimeoutExpired:
            raise TransientError(f"{argv[0]} timed out") from None
        if proc.returncode == 0:
            return proc.stdout
        output = (proc.stderr or proc.stdout).strip()
        if any(marker in output for marker in ok_errors):
            return ""
        if is_transient(output):
            raise TransientError(f"{argv[0]}: " + output.replace("\n", " "))
        raise ClientError(argv[0], proc.returncode, output)

    def _retrying(self, argv: Sequence[str], *, ok_errors: tuple[str, ...] = ()) -> str:
        """Run one client under the retry policy."""
        return self.retry.call(lambda: self._once(argv, ok_errors=ok_errors))

    # --- Backend -------------------------------------------------------------
    def submit(
        self,
        script: Path,
        *,
        job_name: str,
        dependency: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        exclude: Sequence[str] = (),
    ) -> str:
        argv = ["sbatch", "--parsable", f"--job-name={job_name}"]
        if dependency:
            argv.append(f"--dependency={dependency}")
        if exclude:
            argv.append(f"--exclude={','.join(exclude)}")
        argv.append(str(script))
        job_env = job_environment(os.environ, env)

        def once() -> str:
            try:
                return parse_sbatch_parsable(self._once(argv, env=job_env, cwd=cwd))
            except ValueError as exc:
                raise SchedulerError(str(exc)) from None

        return submit_idempotently(self, job_name, once, retry=self.retry)

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        ids = _checked([j for j in job_ids if j])
        if not ids:
            return {}
        found = self._shown(ids)
        # Ended jobs: the exit code comes from accounting, else scontrol
        # (squeue's state of a job it still shows ended is enough without).
        missing = [j for j in ids if j not in found or (exit_codes and found[j].state.finished)]
        if missing:
            found.update(self._finished(missing, found))
        return found

    def _shown(self, ids: list[str]) -> dict[str, JobInfo]:
        """What slurmctld holds of the jobs. One id through scontrol: 2 RPCs
        (federation info and the one job); squeue, for several, costs a job
        list and the partitions, and for one id all three."""
        if len(ids) == 1:
            shown = parse_scontrol(
                self._retrying(["scontrol", "show", "job", "-o", ids[0]], ok_errors=("Invalid job id",))
            )
            # scontrol prints ExitCode=0:0 for a job still pending or running: squeue's answer has none
            return {j: i if i.state.finished else replace(i, exit_code=None, signal=None) for j, i in shown.items()}
        return parse_squeue(
            self._retrying(
                ["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", SQUEUE_FORMAT],
                ok_errors=("Invalid job id",),
            )
        )

    def _finished(self, ids: list[str], live: dict[str, JobInfo]) -> dict[str, JobInfo]:
        result: dict[str, JobInfo] = {}
        # One try: while slurmctld still holds the job, scontrol answers for a
        # slurmdbd that is down; the retry budget is kept for jobs only
        # accounting knows (below). None: accounting disabled or down.
        accounted = self.accounted(ids)
        acct, acct_ok = (accounted, True) if accounted is not None else ({}, False)
        purged: list[str] = []
        for job_id in ids:
            info = acct.get(job_id)
            squeue_info = live.get(job_id)
            # Records reach slurmdbd asynchronously: a just-ended job may still
            # look running there. Trust squeue's finished state then.
            if info is not None and (squeue_info is None or info.state.finished):
                result[job_id] = info
                continue
            if squeue_info is not None and squeue_info.source == "scontrol":
                shown: JobInfo | None = squeue_info  # asked already (``_shown``): its exit code is there
            else:
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
                acct = parse_sacct(self._retrying(_sacct_states(purged)))
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
        argv += ["--", *_checked([job_id])]  # never an option, whatever it holds
        self._retrying(argv, ok_errors=("Invalid job id", "already completing or completed"))

    def preempting(self, job_id: str, *, restarts: int = 0) -> bool:
        """One scontrol (asked within the preemption's grace, KillWait): see
        ``parse.preempting``."""
        info = parse_scontrol(
            self._once(["scontrol", "show", "job", "-o", *_checked([job_id])], ok_errors=("Invalid job id",))
        ).get(job_id)
        return info is not None and preempting(info, restarts)

    def release(self, job_id: str) -> None:
        self._retrying(
            ["scontrol", "update", f"JobId={_checked([job_id])[0]}", "Dependency="],
            ok_errors=("Invalid job id", "no longer pending", "already finished"),
        )

    def down_nodes(self, nodes: Sequence[str]) -> set[str]:
        """One sinfo for the nodes' states (``parse.down_nodes``)."""
        names = [n for n in nodes if NODE_NAME.fullmatch(n)]
        if not names:
            return set()
        return down_nodes(self._once(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%N|%T"]))

    def job_limits(self, *, account: str = "", qos: str = "", partition: str = "") -> JobLimits | None:
        """``limits.site_limits``: sacctmgr (slurmdbd), then slurmctld once if a limit is set; one try each."""
        from chain.backends.slurm.limits import site_limits

        return site_limits(
            lambda argv: self._once(argv), getpass.getuser(), account=account, qos=qos, partition=partition
        )

    def scheduler_end(self, job_id: str) -> float | None:
        """One ``scontrol show job`` (2 slurmctld RPCs)."""
        info = parse_scontrol(self._once(["scontrol", "show", "job", "-o", job_id], ok_errors=("Invalid job id",))).get(
            job_id
        )
        if info is None or info.state not in (JobState.RUNNING, JobState.COMPLETING):
            return None
        return info.end

    def query_scope(self) -> str:
        """The cluster the clients ask: its configuration file and ``-M`` choice."""
        return f"slurm-cli {os.environ.get('SLURM_CONF', '')} {os.environ.get('SLURM_CLUSTERS', '')}"

    def accounted(self, job_ids: Sequence[str]) -> dict[str, JobInfo] | None:
        """One sacct try (slurmdbd: no slurmctld RPC); None when accounting is
        off or does not answer."""
        ids = _checked([j for j in job_ids if j])
        if not ids:
            return {}
        try:
            return parse_sacct(self._once(_sacct_states(ids)))
        except SchedulerError:
            return None

    def accounted_later(self, job_ids: Sequence[str]) -> Callable[[], dict[str, JobInfo] | None]:
        """``accounted``'s sacct started now (slurmdbd answers in ~0.1 s, most
        of it waiting), its answer parsed when asked. A bad id is refused now
        (``SchedulerError``), as ``accounted`` refuses it."""
        ids = _checked([j for j in job_ids if j])
        if not ids:
            return dict
        argv = _sacct_states(ids)
        try:
            started = self._start(argv)
        except OSError:  # not on PATH, or no process to be had: no accounting to ask
            return lambda: None

        @functools.cache
        def answer() -> dict[str, JobInfo] | None:
            try:
                return parse_sacct(self._outcome(argv, started))
            except SchedulerError:
                return None

        return answer

    def usage(self, job_ids: Sequence[str]) -> dict[str, JobUsage]:
        """sacct's accounting, SACCT_BATCH ids per call (one call for a chain
        of up to that many jobs), each under the retry policy."""
        ids = _checked([j for j in dict.fromkeys(job_ids) if j])
        found: dict[str, JobUsage] = {}
        for i in range(0, len(ids), SACCT_BATCH):
            argv = ["sacct", "-n", "-P", "-j", ",".join(ids[i : i + SACCT_BATCH]), "-o", SACCT_USAGE_FIELDS]
            try:
                found.update(parse_sacct_usage(self._retrying(argv)))
            except ClientError as exc:
                raise AccountingUnavailable(
                    sacct_error_reason(exc.output) or f"sacct exited {exc.returncode}"
                ) from None
            except SchedulerError as exc:  # not on PATH, or still failing after the retries
                raise AccountingUnavailable(str(exc)) from None
        return found

    def available(self) -> bool:
        import shutil

        if shutil.which("sbatch") is None or shutil.which("squeue") is None:
            return False
        try:
            # One try: auto-detection must not wait out a retry budget.
            self._once(["sinfo", "-h", "-o", "%P"])
        except SchedulerError:
            return False
        return True


def _deferred(run: Run) -> Start:
    """A ``Start`` that runs the client with ``run`` when its outcome is asked."""

    def start(argv: Sequence[str]) -> Callable[[], subprocess.CompletedProcess[str]]:
        return functools.cache(lambda: run(argv, None, None))

    return start


def _sacct_states(ids: Sequence[str]) -> list[str]:
    """sacct's line for each of the jobs (no steps), as ``parse_sacct`` reads it."""
    return ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", SACCT_FIELDS]


def _checked(ids: list[str]) -> list[str]:
    """Job ids as Slurm writes them, or a one-line refusal: a value from a
    tampered file never becomes an option or a second argument."""
    for job_id in ids:
        if not JOB_ID.fullmatch(job_id):
            raise SchedulerError(f"refusing job id {job_id!r}: not a Slurm job id")
    return ids
