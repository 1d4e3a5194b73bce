"""The per-job supervisor process of the local backend.

``python -m chain.backends.local _supervise SPOOL ID`` detaches with a double
fork, waits for the job's dependencies, runs the batch script as its own
process group, enforces the time limit and cancel requests, and writes the
final state into the job's record (``chain.backends.local.spool``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from chain.backends.local.dependency import dependency_verdict
from chain.backends.local.spool import JobRecord, Spool, kill_job_group, short_hostname
from chain.core.model import JobState
from chain.primitives.output import keep_job_output
from chain.primitives.procs import boot_id, start_ticks

POLL = 0.1  # seconds between looks at the spool / the job: local files, cheap


def job_environment(record: JobRecord) -> dict[str, str]:
    """The submitter's environment (inherited by the supervisor) + env + SLURM_*."""
    # SLURM_* left over from an enclosing job (the submitter job itself) would
    # describe the wrong job.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_"))}
    env.update(record.env)
    env.update(
        {
            "SLURM_JOB_ID": record.job_id,
            "SLURM_JOBID": record.job_id,
            "SLURM_JOB_NAME": record.name,
            "SLURM_JOB_USER": record.user,
            "SLURM_SUBMIT_DIR": record.submit_dir,
            "SLURM_SUBMIT_HOST": record.hostname,
            "SLURM_CLUSTER_NAME": "local",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NNODES": "1",
            "SLURM_NTASKS": "1",
            "SLURMD_NODENAME": short_hostname(),
            "CHAIN_LOCAL_SPOOL": str(Path(record.batch_script).parent.parent),
            "PWD": record.work_dir,
        }
    )
    if record.start is not None:
        env["SLURM_JOB_START_TIME"] = str(int(record.start))
        if record.end is not None:
            env["SLURM_JOB_END_TIME"] = str(int(record.end))  # as Slurm >= 23.02
    return env


class Supervisor:
    """Runs one job to its end; every decision is recorded under the job lock."""

    def __init__(self, spool: Spool, job_id: str) -> None:
        self.spool = spool
        self.job_id = job_id
        self.term_received = False  # SIGTERM: a cancel request (or a shutdown)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ended: set[str] = set()  # singleton peers seen finished

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.term_received = True

    def run(self) -> None:
        # A handler, not SIG_IGN: handlers reset to default in the exec'd job.
        signal.signal(signal.SIGTERM, self._on_term)
        try:
            if self._wait_dependencies():
                self._run_job()
        except BaseException as exc:
            self._crash(exc)
            raise

    def _wait_dependencies(self) -> bool:
        """Poll until runnable; False when the job ended while pending."""
        while True:
            record = self.spool.read(self.job_id)
            if record is None or record.state is not JobState.PENDING:
                return False  # cancelled while pending (cancel() wrote the record)
            if self.term_received:
                self._finish_pending_on_term()
                return False
            verdict = dependency_verdict(self.spool, record, self.ended)
            if verdict == "ok":
                return True
            reason = "Dependency" if verdict == "wait" else "DependencyNeverSatisfied"
            if record.reason != reason:
                with self.spool.locked(self.job_id):
                    record = self.spool.read(self.job_id)
                    if record is not None and record.state is JobState.PENDING:
                        record.reason = reason
                        self.spool.write(record)
            # Slurm leaves a never-satisfiable job pending; no need to look often.
            time.sleep(POLL if verdict == "wait" else 1.0)

    def _finish_pending_on_term(self) -> None:
        with self.spool.locked(self.job_id):
            record = self.spool.read(self.job_id)
            if record is not None and record.state is JobState.PENDING:
                record.finish(JobState.CANCELLED, reason="supervisor got SIGTERM")
                self.spool.write(record)

    def _start(self) -> JobRecord | None:
        """Start the batch shell under the lock, so cancel() sees PENDING or RUNNING."""
        with self.spool.locked(self.job_id):
            record = self.spool.read(self.job_id)
            if record is None or record.state is not JobState.PENDING:
                return None
            record.start = time.time()
            record.end = None if record.time_limit is None else record.start + record.time_limit
            try:
                mode = "ab" if record.open_mode == "append" else "wb"
                with contextlib.ExitStack() as files:
                    out = files.enter_context(open(record.stdout, mode))
                    err = out if record.stderr == record.stdout else files.enter_context(open(record.stderr, mode))
                    self.proc = subprocess.Popen(
                        ["bash", record.batch_script],
                        cwd=record.work_dir,
                        env=job_environment(record),
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,  # own process group: signal it whole
                    )
            except OSError as exc:
                record.finish(JobState.FAILED, reason=f"launch failed: {exc}", exit_code=1)
                self.spool.write(record)
                return None
            record.state = JobState.RUNNING
            record.reason = "None"
            record.batch_pid = self.proc.pid
            record.batch_ticks = start_ticks(self.proc.pid)  # unreaped: there even if it exited at once
            self.spool.write(record)
            return record

    def _run_job(self) -> None:
        record = self._start()
        if record is None or self.proc is None:
            return
        outcome, (code, sig) = self._watch(record, self.proc)
        # The batch shell is a zombie now (not reaped), so its pid and group id
        # cannot be reused: kill leftovers, as Slurm does when the batch step ends.
        kill_job_group(record, signal.SIGKILL, own_child=True)
        self._record_end(record, outcome, code, sig)
        self.proc.wait()  # reap only now that the record no longer names the pid

    def _watch(self, record: JobRecord, proc: subprocess.Popen[bytes]) -> tuple[JobState | None, tuple[int, int]]:
        """Wait for the batch shell to exit, ending it on its time limit or a
        cancel (SIGTERM, then SIGKILL after KillWait): (why we ended it,
        TIMEOUT/CANCELLED, or None; its exit code and signal)."""
        outcome: JobState | None = None
        kill_at: float | None = None
        last_look = time.time()
        while (status := _exited(proc)) is None:
            now = time.time()
            if outcome is None:
                outcome, last_look = self._reason_to_end(record, now, last_look)
            if outcome is not None and kill_at is None:
                kill_job_group(record, signal.SIGTERM, own_child=True)
                kill_at = now + record.kill_wait
            elif kill_at is not None and now >= kill_at:
                kill_job_group(record, signal.SIGKILL, own_child=True)
                kill_at = float("inf")
            time.sleep(POLL)
        return outcome, status

    def _reason_to_end(self, record: JobRecord, now: float, last_look: float) -> tuple[JobState | None, float]:
        """(TIMEOUT/CANCELLED or None, when the record was last read)."""
        if record.end is not None and now >= record.end:
            return JobState.TIMEOUT, last_look
        if not (self.term_received or now - last_look >= 1.0):
            return None, last_look
        # The record is the truth; the signal only makes us look now.
        fresh = self.spool.read(self.job_id)
        if self.term_received or (fresh is not None and fresh.cancel_requested):
            return JobState.CANCELLED, now
        return None, now

    def _record_end(self, record: JobRecord, outcome: JobState | None, code: int, sig: int) -> None:
        with self.spool.locked(self.job_id):
            final = self.spool.read(self.job_id) or record
            if outcome is JobState.TIMEOUT:
                final.finish(JobState.TIMEOUT, reason="TimeLimit")  # ExitCode 0:0 like Slurm
            elif outcome is JobState.CANCELLED:
                if not final.cancel_requested:
                    final.reason = "supervisor got SIGTERM"
                final.finish(JobState.CANCELLED, reason=final.reason, exit_code=code, sig=sig)
            elif code == 0 and sig == 0:
                final.finish(JobState.COMPLETED, reason="None")
            else:
                final.finish(JobState.FAILED, reason="NonZeroExitCode", exit_code=code, sig=sig)
            self.spool.write(final)

    def _crash(self, exc: BaseException) -> None:
        """Best effort: never leave a job RUNNING behind a dead supervisor."""
        with contextlib.suppress(Exception), self.spool.locked(self.job_id):
            record = self.spool.read(self.job_id)
            if record is not None and record.active:
                kill_job_group(record, signal.SIGKILL, own_child=self.proc is not None and self.proc.returncode is None)
                record.finish(JobState.NODE_FAIL, reason=f"supervisor error: {exc!r}")
                self.spool.write(record)


def _exited(proc: subprocess.Popen[bytes]) -> tuple[int, int] | None:
    """(exit code, signal) once the child ended, without reaping it where possible."""
    if hasattr(os, "waitid"):
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None or info.si_pid == 0:
            return None
        if info.si_code == os.CLD_EXITED:
            return info.si_status, 0
        return 0, info.si_status  # killed or dumped: Slurm's ExitCode 0:S
    returncode = proc.poll()  # no waitid (macOS): reaps, tiny pid-reuse window
    if returncode is None:
        return None
    return (returncode, 0) if returncode >= 0 else (0, -returncode)


def supervise_main(spool_dir: str, job_id: str) -> int:
    """Entry of ``_supervise``: detach, register, run.

    The process submit() started forks once more and exits: the supervisor is
    then an orphan adopted by init (no zombie in a long-lived submitter, no
    controlling terminal), and submit() learns by our exit status that the
    supervisor is registered.
    """
    keep_job_output()  # its log is in the chain directory: a full disk must not end it
    spool = Spool(Path(spool_dir))
    child = os.fork()
    if child:
        ticks = start_ticks(child)
        with spool.locked(job_id):
            record = spool.read(job_id)
            if record is None:
                os.kill(child, signal.SIGKILL)
                return 1
            record.supervisor_pid = child
            record.supervisor_ticks = ticks
            record.boot_id = boot_id()
            spool.write(record)
        os._exit(0)
    Supervisor(spool, job_id).run()
    sys.stdout.flush()
    os._exit(0)
