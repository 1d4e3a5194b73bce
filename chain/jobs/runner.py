"""The runner: runs the app inside the runner job, stops it before the wall
time so it can checkpoint, and records the outcome for the submitter.

Exit contract (the seed's), as recorded in the runner's record: 0 all
iterations done; 99 app checkpointed voluntarily; 124 stopped at the deadline
with checkpoint advance; 1 stopped without advance; other codes passed
through. 75 (EX_TEMPFAIL) passes through. The job itself exits 0 for the
codes that hand over to the next runner (see ``job_exit_code``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from chain.backends.base import Backend
from chain.core.model import CONTINUE_CODES, EXIT_DONE, EXIT_NO_ADVANCE, EXIT_TIMEOUT_ADVANCED
from chain.core.settings import LaunchMode, Settings
from chain.errors import ChainError, CheckpointError
from chain.jobs.appenv import app_environ
from chain.store import ChainDir, ChainStatus, read_counter, write_json_atomic

_SIGNALS = {int(s) for s in signal.Signals}
EXIT_PREFLIGHT = 2
EXIT_BAD_CHECKPOINT = 3


@dataclass(frozen=True)
class Schedule:
    """When the runner signals and, failing that, kills the app."""

    start: float
    end: float  # earlier of Slurm's end time and start + configured limit
    stop_at: float  # end - margin: the stop signal (CHAIN_DEADLINE)
    kill_at: float  # stop_at + grace: SIGKILL if the app still runs


def plan_schedule(start: float, limit: int, margin: int, slurm_end: float | None) -> Schedule:
    """Pure: the runner's timetable.

    The grace after the stop signal is the margin minus a small reserve, so
    the runner can still record the outcome before Slurm's own limit.
    """
    end = start + limit
    if slurm_end is not None and slurm_end < end:
        end = slurm_end
    reserve = min(5.0, margin / 4)
    stop_at = max(start, end - margin)
    kill_at = max(stop_at, end - reserve)
    return Schedule(start=start, end=end, stop_at=stop_at, kill_at=kill_at)


def classify_exit(app_rc: int, we_stopped: bool, advanced: bool) -> int:
    """Pure: the runner's exit code from the app's and who stopped it."""
    if app_rc == EXIT_DONE:
        return EXIT_DONE
    if we_stopped:
        return EXIT_TIMEOUT_ADVANCED if advanced else EXIT_NO_ADVANCE
    return app_rc


def job_exit_code(code: int) -> int:
    """Pure: what the runner job itself exits with, for Slurm.

    A runner that ended the way the contract intends (done, or checkpointed
    for the next runner: 99, 124, 75) exits 0, so Slurm shows it COMPLETED
    and ``--mail-type=FAIL`` does not mail at every handoff. The contract
    code stays in the runner's record, ``chain status`` and ``usage.csv``.
    """
    return 0 if code in (EXIT_DONE, *CONTINUE_CODES) else code


def describe_exit(how: str, ran: float, stop_signal: str, stop_sent: bool, external: str | None,
                  killed: bool) -> str:
    """Pure: the runner's one-line account of how the app ended."""
    if not stop_sent:  # the app ended on its own: a failure, or done
        return f"{how} after {ran:.1f} s, before the stop signal"
    text = f"{how} after SIG{stop_signal}"
    if external:  # a signal name as Python spells it: SIGTERM
        text += f" (runner got {external})"
    return text + (" (killed after the grace period)" if killed else "")


def runner_seq(job_name: str) -> int | None:
    """Sequence number from a runner job name ``<chain_id>.r<seq>``."""
    head, sep, tail = job_name.rpartition(".r")
    return int(tail) if sep and tail.isdigit() else None


def shell_helpers_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "shell"  # chain/shell


def _wait_for_promotion(chain: ChainDir, job_id: str, seq: int | None, clock: Callable[[], float],
                        patience: float = 120.0) -> ChainStatus | None:
    """A runner pre-queued by lookahead starts as soon as its predecessor
    ends, before the submitter has judged it: wait until the submitter makes
    it the current runner, or drops it (chain ended, or not continued)."""
    give_up = clock() + patience
    while True:
        status = chain.load_status()
        if status is None or status.state.ended or status.next_job_id != job_id or seq != status.runner_seq + 1:
            return status
        if clock() >= give_up:
            return status
        time.sleep(0.1)


class _Signals:
    """Signal handlers only record what arrived; the loop acts on it."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)


def run(
    chain: ChainDir,
    settings: Settings,
    backend: Backend,
    *,
    job_id: str,
    job_name: str,
    workdir: Path,
    preflight_error: str | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Run the app once; returns the runner's exit code (see module doc)."""
    record_path = chain.record_file(job_id)
    record: dict[str, Any] = {"job_id": job_id, "job_name": job_name, "seq": runner_seq(job_name),
                              "status": "starting", "start": clock(), "host": os.uname().nodename}

    def save(**changes: Any) -> None:
        record.update(changes)
        write_json_atomic(record_path, record)

    previous = chain.read_record(job_id)
    if previous is not None and previous.get("status") == "ended":
        # Slurm requeued this job (node failure) after it had already run and
        # recorded its outcome: the submitter judges that record and may have
        # started the next runner, so this copy must not run the app again.
        print(f"chain runner {job_id}: this job already ran (requeued after recording its end); "
              "exiting without running the app", flush=True)
        return 0
    seq = runner_seq(job_name)
    status = _wait_for_promotion(chain, job_id, seq, clock)
    if status is None or status.state.ended or (seq is not None and seq != status.runner_seq) \
            or (status.runner_job_id and status.runner_job_id != job_id):
        # A stale or pre-queued runner: never run a second copy of the app.
        save(status="ended", exit_code=0, superseded=True, end=clock(),
             detail="superseded: not the chain's current runner")
        print(f"chain runner {job_id}: not the chain's current runner; exiting without running the app")
        return 0

    ckpt = workdir / settings.ckpt_path
    try:
        iter_before = read_counter(ckpt)
    except CheckpointError as exc:
        save(status="ended", exit_code=EXIT_BAD_CHECKPOINT, end=clock(), detail=str(exc))
        print(f"chain runner: {exc}")
        return EXIT_BAD_CHECKPOINT
    if preflight_error:
        save(status="ended", exit_code=EXIT_PREFLIGHT, end=clock(), iter_before=iter_before,
             iter_after=iter_before, detail=preflight_error)
        print(f"chain runner: {preflight_error}")
        return EXIT_PREFLIGHT

    start = clock()
    try:
        slurm_end = backend.end_time(job_id)
    except ChainError:
        slurm_end = None  # the configured limit still bounds the schedule
    margin = max(settings.runner_margin, status.margin) if settings.adaptive_margin else settings.runner_margin
    plan = plan_schedule(start, settings.runner_seconds, margin, slurm_end)
    stop_sig = signal.Signals[f"SIG{settings.stop_signal}"]
    env = app_environ(os.environ, venv_on_path=settings.venv_on_path)
    env.update(
        MAX_ITER=str(settings.max_iter),
        CKPT_PATH=settings.ckpt_path,
        CHECKPOINT_EVERY=str(settings.checkpoint_every),
        CHAIN_DEADLINE=f"{plan.stop_at:.3f}",
        CHAIN_STOP_SIGNAL=settings.stop_signal,
        CHAIN_SHELL_HELPERS=str(shell_helpers_dir()),
        CHAIN_DIR=str(chain.root),
        CHAIN_ID=status.chain_id,
    )
    argv = ["bash", "-c", settings.app_cmd]
    if settings.launch_mode is LaunchMode.SRUN:
        argv = ["srun", *settings.srun_argv, *argv]
    save(status="running", start=start, end_planned=plan.end, margin=margin, stop_at=plan.stop_at,
         kill_at=plan.kill_at, slurm_end=slurm_end, iter_before=iter_before, argv=argv)
    print(f"chain runner {job_id}: start, counter {iter_before}, stop signal at "
          f"{time.strftime('%H:%M:%S', time.localtime(plan.stop_at))}", flush=True)

    signals = _Signals()
    signals.install()
    try:
        proc = subprocess.Popen(argv, cwd=workdir, env=env, start_new_session=True)
    except OSError as exc:
        save(status="ended", exit_code=127, end=clock(), iter_after=iter_before,
             detail=f"cannot start the app: {exc.strerror}")
        return 127

    app_started = clock()
    save(app_start=app_started)
    group = settings.launch_mode is LaunchMode.DIRECT
    stop_sent: float | None = None
    external: str | None = None
    killed = False

    def deliver(sig: int) -> None:
        try:
            if group:
                os.killpg(proc.pid, sig)
            elif sig == signal.SIGKILL:
                proc.kill()
            else:
                # srun turns SIGTERM into killing the step and needs two SIGINTs:
                # signal the job steps (srun's tasks) through Slurm instead.
                backend.cancel(job_id, signal=signal.Signals(sig).name.removeprefix("SIG"), steps_only=True)
        except ProcessLookupError:
            pass
        except ChainError as exc:
            print(f"chain runner {job_id}: could not signal the job steps: {exc}", flush=True)

    while True:
        if signals.received:
            got = signals.received.pop(0)
            if external is None:
                external = signal.Signals(got).name
                stop_sent = stop_sent or clock()
                deliver(stop_sig)
        now = clock()
        if stop_sent is None and now >= plan.stop_at:
            stop_sent = now
            deliver(stop_sig)
            print(f"chain runner {job_id}: sent SIG{settings.stop_signal} to the app", flush=True)
        if stop_sent is not None and not killed and now >= max(plan.kill_at, stop_sent + 1):
            killed = True
            deliver(signal.SIGKILL)
            print(f"chain runner {job_id}: app still alive, killed it", flush=True)
        deadline = plan.stop_at if stop_sent is None else plan.kill_at
        try:
            proc.wait(timeout=max(0.05, min(0.5, deadline - clock())))
            break
        except subprocess.TimeoutExpired:
            continue

    ended = clock()
    rc = proc.returncode
    app_rc = 128 - rc if rc < 0 else rc  # killed by signal N -> 128+N, as a shell reports
    try:
        iter_after = read_counter(ckpt)
        counter_error = ""
    except CheckpointError as exc:
        iter_after, counter_error = iter_before, str(exc)
    we_stopped = stop_sent is not None and external is None
    code = classify_exit(app_rc, we_stopped, iter_after > iter_before)
    if counter_error:
        code = EXIT_BAD_CHECKPOINT
    how = f"app killed by {signal.Signals(-rc).name} (exit {app_rc})" if rc < 0 and -rc in _SIGNALS \
        else f"app exited {app_rc}"
    detail = counter_error or describe_exit(how, ended - app_started, settings.stop_signal,
                                            stop_sent is not None, external, killed)
    save(status="ended", exit_code=code, app_exit_code=app_rc, end=ended, iter_after=iter_after,
         stop_sent=stop_sent, stop_to_exit=(ended - stop_sent) if stop_sent else None,
         external_signal=external, killed=killed, detail=detail)
    print(f"chain runner {job_id}: {detail}; counter {iter_before}->{iter_after}; exit {code}", flush=True)
    return code
