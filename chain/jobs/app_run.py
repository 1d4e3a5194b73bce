"""The app's run inside the chain's current runner: started (never beside an
earlier app of the chain) with the contract's environment, guarded against
the runner's death, signalled before the wall time and supervised
(``jobs.supervise``), then the record of how it ended (``core.records``),
judged by its counter and the runner's exit contract (``core.runner_rules``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from chain.backends.base import Backend
from chain.core.decision import missing_counter
from chain.core.launch import LaunchStrategy, strategy
from chain.core.names import runner_name
from chain.core.rankends import RanksJudgment, judge_ranks
from chain.core.records import RunnerPhase, RunnerRecord
from chain.core.runner_rules import Schedule, classify_exit, describe_exit, exited_on_stop
from chain.core.settings import Settings
from chain.core.stall import StallWatch
from chain.effects.appenv import app_environ, app_umask, mark_resuming
from chain.errors import ChainError, CheckpointError
from chain.jobs.guard import Guard, start_guard
from chain.jobs.launching import fresh_ranks_dir, gather_site, read_rank_ends
from chain.jobs.progress import iterations_printed, log_offset, progress_marks
from chain.jobs.sigterm import restart_count
from chain.jobs.supervise import AppEnd, AppLock, Deliver, Due, Signals, die_with_parent, group_sender, supervise
from chain.primitives.codes import RunnerExit
from chain.primitives.paths import shell_helpers_dir
from chain.primitives.signals import signal_name
from chain.store import ChainDir, ChainStatus
from chain.store.counter import counter_source, read_counter_state, saved_at


def run_app(
    chain: ChainDir,
    settings: Settings,
    backend: Backend,
    record: RunnerRecord,
    plan: Schedule,
    status: ChainStatus,
    workdir: Path,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    *,
    due: Due | None = None,
) -> int:
    """Start the app (never beside an earlier one of the chain), supervise
    it (``due``: ``supervise``'s), record how it ended."""
    lock = AppLock(str(chain.root / "app.lock"))
    if not lock.acquire(until=plan.stop_at, clock=clock, sleep=sleep):
        lock.close()
        record.iter_after = record.iter_before
        return end_record(
            chain,
            record,
            RunnerExit.APP_ALIVE,
            clock(),
            "an earlier app of this chain is still running: not starting a second one",
        )
    launch = strategy(settings)
    site = gather_site(record.job_id, os.environ, srun=backend.job_steps, rendezvous=launch.rendezvous)
    argv = launch.argv(settings, site)
    world = launch.world(settings, site)
    ranks_dir = fresh_ranks_dir(chain, record.job_id) if world else None
    record.status, record.argv, record.start = RunnerPhase.RUNNING, argv, plan.start
    record.end_planned, record.margin = plan.end, plan.margin
    record.stop_at, record.kill_at, record.slurm_end = plan.stop_at, plan.kill_at, plan.slurm_end
    chain.write_runner_record(record)
    say(
        record,
        f"start, counter {record.iter_before}, stop signal at "
        f"{time.strftime('%H:%M:%S', time.localtime(plan.stop_at))}",
    )
    signals = Signals()
    signals.install()
    stop_sig = settings.stop_signum
    offset = log_offset() if settings.progress_pattern else None  # the app's output starts here
    try:
        # the app holds the lock (an inherited descriptor) for as long as it
        # lives, and gets the stop signal if this runner dies (preexec_fn:
        # the runner has no threads, and prctl must run in the child)
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=_app_env(chain, settings, status, plan, record, ranks_dir),
            start_new_session=True,
            umask=app_umask(os.environ),
            pass_fds=(lock.fd,),
            preexec_fn=lambda: die_with_parent(stop_sig),  # noqa: PLW1509
        )
    except OSError as exc:
        record.iter_after = record.iter_before
        return end_record(chain, record, RunnerExit.CANNOT_START, clock(), f"cannot start the app: {exc.strerror}")
    finally:
        lock.close()
    record.app_start = clock()
    chain.write_runner_record(record)
    guard = _start_guard(proc.pid, settings, stop_sig, record)
    deliver = _step_sender(proc, backend, record) if launch.steps(site) else group_sender(proc)
    end = supervise(
        proc,
        plan,
        stop_signal=stop_sig,
        deliver=deliver,
        signals=signals,
        clock=clock,
        say=lambda line: say(record, line),
        watch=_stall_watch(chain, settings, workdir),
        due=due,
    )
    if guard is not None:
        guard.release()  # the app has ended: its guard finds nothing to stop
    if settings.progress_pattern:
        record.iter_first, record.iter_reached = iterations_printed(settings.progress_pattern, offset)
    if end.external == "SIGTERM":
        record.preempted = _preempting(backend, record)
    ranks = _judge_ranks(launch, end, ranks_dir, world)
    return _record_end(chain, settings, record, end, workdir, ranks)


def _judge_ranks(launch: LaunchStrategy, end: AppEnd, ranks_dir: Path | None, world: int) -> RanksJudgment:
    """The exit code to judge the app by: its own, or under a launcher the ranks' (``core.rankends``)."""
    if ranks_dir is None:
        return RanksJudgment(end.app_exit_code)
    return judge_ranks(launch.name, end.app_exit_code, read_rank_ends(ranks_dir, world), world)


def _heartbeat(chain: ChainDir) -> Path:
    return chain.root / "heartbeat"


def _stall_watch(chain: ChainDir, settings: Settings, workdir: Path) -> StallWatch | None:
    """The watchdog of ``--stall-timeout`` (none by default): the counter,
    the iteration log, the heartbeat file and the job's log as signs of progress."""
    if not settings.stall_timeout:
        return None
    paths = [
        workdir / settings.ckpt_path,
        workdir / os.environ.get("CHAIN_ITER_LOG", "iterations.log"),
        _heartbeat(chain),
    ]
    return StallWatch(float(settings.stall_timeout), lambda: progress_marks(paths))


def _preempting(backend: Backend, record: RunnerRecord) -> bool:
    """Whether the outside SIGTERM was Slurm's preemption (one quick question,
    within the preemption's grace): the runner is then judged "preempted",
    never a failure or a runner without progress."""
    try:
        return backend.preempting(record.job_id, restarts=restart_count(os.environ))
    except ChainError as exc:
        say(record, f"could not ask whether the job is being preempted: {exc}")
        return False


def _start_guard(app_pid: int, settings: Settings, stop_sig: signal.Signals, record: RunnerRecord) -> Guard | None:
    """Start the app's guard (``jobs.guard``): it stops the app's process
    group if this runner dies first; None when it cannot be started."""
    grace = min(max(settings.runner_margin, 10), 60)
    try:
        guard = start_guard(app_pid, grace, stop_sig)
    except OSError as exc:  # the app runs unguarded: PDEATHSIG and the app lock remain
        say(record, f"could not start the app's guard: {exc.strerror}")
        return None
    if guard is None:
        say(record, "could not start the app's guard: the runner has another thread (no fork then)")
    return guard


def _app_env(
    chain: ChainDir,
    settings: Settings,
    status: ChainStatus,
    plan: Schedule,
    record: RunnerRecord,
    ranks_dir: Path | None,
) -> dict[str, str]:
    """The contract's variables (``chain.app.contract``) on the job's environment."""
    env = mark_resuming(app_environ(os.environ, venv_on_path=settings.venv_on_path), record.iter_before or 0)
    env.update(
        MAX_ITER=str(settings.max_iter),
        CKPT_PATH=settings.ckpt_path,
        CHECKPOINT_EVERY=str(settings.checkpoint_every),
        CHAIN_KEEP_CHECKPOINTS=str(settings.keep_checkpoints),
        CHAIN_DEADLINE=f"{plan.stop_at:.3f}",
        CHAIN_STOP_SIGNAL=settings.stop_signal,
        CHAIN_SHELL_HELPERS=str(shell_helpers_dir({})),
        CHAIN_DIR=str(chain.root),
        CHAIN_ID=status.chain_id,
    )
    if ranks_dir is not None:
        env["CHAIN_RANKS_DIR"] = str(ranks_dir)  # the rank wrapper records each rank's end there
    if settings.stall_timeout:
        env["CHAIN_HEARTBEAT"] = str(_heartbeat(chain))  # touched by the app: a sign of life
    return env


def _step_sender(proc: subprocess.Popen[bytes], backend: Backend, record: RunnerRecord) -> Deliver:
    """Signals for an app under srun: srun turns SIGTERM into killing the step
    and needs two SIGINTs, so the job steps (srun's tasks) are signalled
    through the scheduler; SIGKILL goes to srun itself."""

    def deliver(sig: int) -> None:
        try:
            if sig == signal.SIGKILL:
                proc.kill()
            else:
                backend.cancel(record.job_id, signal=signal_name(sig), steps_only=True)
        except ProcessLookupError:
            pass
        except ChainError as exc:
            say(record, f"could not signal the job steps: {exc}")

    return deliver


def _record_end(
    chain: ChainDir, settings: Settings, record: RunnerRecord, end: AppEnd, workdir: Path, ranks: RanksJudgment
) -> int:
    before, present = record.iter_before or 0, True
    try:
        reading = read_counter_state(settings, workdir)
        record.iter_after, counter_error, present = reading.value, "", reading.present
        record.saved_at = saved_at(reading)
    except CheckpointError as exc:
        record.iter_after, counter_error = before, str(exc)
    # the app saw a stop signal either way (an outside one is forwarded as the stop signal): an exit 0
    # after it is a save-and-exit, judged by its counter, never "done" below MAX_ITER
    we_stopped = end.stop_sent is not None and (end.external is None or ranks.exit_code == 0)
    code = (
        RunnerExit.BAD_CHECKPOINT
        if counter_error
        else classify_exit(
            ranks.exit_code,
            we_stopped,
            record.iter_after > before,
            reached_max=record.iter_after >= settings.max_iter,
        )
    )
    record.app_exit_code, record.stop_sent, record.external_signal = end.app_exit_code, end.stop_sent, end.external
    record.killed, record.stalled = end.killed, end.stalled
    record.stop_to_exit = (end.ended - end.stop_sent) if end.stop_sent else None
    exit_code = end.returncode if end.returncode >= 0 else None
    record.stopped_on_signal = exited_on_stop(end.stop_sent is not None, end.external, end.killed, exit_code)
    detail = counter_error or describe_exit(
        end.how,
        end.ended - (record.app_start or end.ended),
        settings.stop_signal,
        end.stop_sent is not None,
        end.external,
        end.killed,
        exit_code=exit_code,
    )
    if ranks.note:
        detail += f"; {ranks.note}"
    if end.stalled is not None:
        detail = f"stopped as stalled, no sign of progress for {end.stalled:.0f} s: {detail}"
    if not counter_error and not present:
        # read as 0, the chain would only see "no advance": name the file the app never wrote
        detail += f"; {missing_counter(counter_source(settings), before)}"
    end_record(chain, record, code, end.ended, detail)
    say(record, f"{detail}; counter {before}->{record.iter_after}; exit {code}")
    return code


def end_record(
    chain: ChainDir, record: RunnerRecord, code: int, when: float, detail: str, *, superseded: bool = False
) -> int:
    """Record the outcome: from here the submitter may judge this runner."""
    record.status, record.exit_code, record.end, record.detail = RunnerPhase.ENDED, code, when, detail
    record.superseded = superseded
    chain.write_runner_record(record)
    if not superseded and code in (RunnerExit.BAD_CHECKPOINT, RunnerExit.PREFLIGHT):
        say(record, detail)
    return code


def say(record: RunnerRecord, line: str) -> None:
    """A line of the runner's log, the runner named as ``chain logs`` and ``chain status`` name it."""
    print(f"chain {runner_name(record.seq, record.job_id)}: {line}", flush=True)
