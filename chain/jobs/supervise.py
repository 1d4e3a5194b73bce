"""The app's process inside the runner job: started in its own process
group, sent the stop signal at the planned time (or when the runner itself is
signalled from outside), killed if it outlives the grace. Returns how it ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from chain.core.runner_rules import Schedule
from chain.core.stall import StallWatch
from chain.primitives.exitwait import ExitWait

_SIGNALS = {int(s) for s in signal.Signals}


@dataclass(frozen=True)
class AppEnd:
    """How the app's process ended."""

    returncode: int  # Popen's: -N when killed by signal N
    ended: float
    stop_sent: float | None  # when the stop signal went out (None: never)
    external: str | None  # a signal the runner got from outside, as Python names it (SIGTERM)
    killed: bool  # it outlived the grace and was killed
    stalled: float | None = None  # seconds without a sign of progress when the watchdog stopped it

    @property
    def app_exit_code(self) -> int:
        """As a shell reports it: killed by signal N -> 128 + N."""
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    @property
    def how(self) -> str:
        rc = self.returncode
        if rc < 0 and -rc in _SIGNALS:
            return f"app killed by {signal.Signals(-rc).name} (exit {self.app_exit_code})"
        return f"app exited {self.app_exit_code}"


class Signals:
    """Signal handlers only record what arrived; the loop acts on it."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)


Deliver = Callable[[int], None]


@dataclass(frozen=True)
class Due:
    """What the supervision does once at ``at`` if the app still runs and
    has not been signalled, given the stop time to be done by (a relay
    runner queues the successor it deferred, or asks about the one it
    queued: ``jobs.relay.Relay.due_beside_app``)."""

    at: float
    act: Callable[[float], None]


def supervise(
    proc: subprocess.Popen[bytes],
    plan: Schedule,
    *,
    stop_signal: int,
    deliver: Deliver,
    signals: Signals,
    clock: Callable[[], float],
    say: Callable[[str], None],
    watch: StallWatch | None = None,
    due: Due | None = None,
) -> AppEnd:
    """Wait for the app, signalling it at ``plan.stop_at`` (or at once when
    the runner is signalled, or when ``watch`` finds it stalled) and killing
    it at ``plan.kill_at`` (a stalled app: the same grace after its signal);
    ``due``: acted on once, at its time, while the app runs unsignalled."""
    run = _Supervision(plan, stop_signal, deliver, signals, say, watch, kill_at=plan.kill_at)
    exited = ExitWait(proc)  # asleep until the app exits or a look is due: no polling
    try:
        while True:
            now = clock()
            run.step(now)
            if due is not None and (run.stop_sent is not None or now >= due.at):
                if run.stop_sent is None:
                    _act(due, plan.stop_at, say)
                due = None  # once; a signalled app's runner decides after its end
            deadline = plan.stop_at if run.stop_sent is None else run.kill_at
            if exited.wait(max(0.05, min(0.5, deadline - clock()))):
                break
    finally:
        exited.close()
    if run.external is None and signals.received:
        # Slurm signals every process of the job (preemption, scancel): the app may
        # have saved and exited on its own copy before this loop passed ours on
        run.external = signal.Signals(signals.received[0]).name
    return AppEnd(proc.returncode, clock(), run.stop_sent, run.external, run.killed, run.stalled)


def _act(due: Due, until: float, say: Callable[[str], None]) -> None:
    """``due.act(until)``; a fault of it is told, and the app supervised on."""
    try:
        due.act(until)
    except Exception as exc:  # noqa: BLE001 - the app's supervision must go on
        say(f"could not do what was due while the app ran: {exc}")


@dataclass
class _Supervision:
    """What ``supervise`` did so far, and one look at what is due now."""

    plan: Schedule
    stop_signal: int
    deliver: Deliver
    signals: Signals
    say: Callable[[str], None]
    watch: StallWatch | None
    kill_at: float
    stop_sent: float | None = None
    external: str | None = None  # the first signal the runner got from outside
    stalled: float | None = None
    killed: bool = False

    def step(self, now: float) -> None:
        self._pass_on_outside_signal(now)
        self._stop_if_stalled(now)
        if self.stop_sent is None and now >= self.plan.stop_at:
            self.stop_sent = now
            self.deliver(self.stop_signal)
            self.say(f"sent {signal.Signals(self.stop_signal).name} to the app")
        if self.stop_sent is not None and not self.killed and now >= max(self.kill_at, self.stop_sent + 1):
            self.killed = True
            self.deliver(signal.SIGKILL)
            self.say("app still alive, killed it")

    def _pass_on_outside_signal(self, now: float) -> None:
        if not self.signals.received:
            return
        got = self.signals.received.pop(0)
        if self.external is None:
            self.external = signal.Signals(got).name
            self.stop_sent = self.stop_sent or now
            self.deliver(self.stop_signal)

    def _stop_if_stalled(self, now: float) -> None:
        if self.stop_sent is not None or self.watch is None or not self.watch.stalled(now):
            return
        self.stalled, self.stop_sent = self.watch.quiet_for(now), now
        self.kill_at = now + max(1.0, self.plan.kill_at - self.plan.stop_at)
        self.deliver(self.stop_signal)
        self.say(
            f"no sign of progress for {self.stalled:.0f} s (counter, output, iteration log, heartbeat): "
            f"the app stalled; sent {signal.Signals(self.stop_signal).name}"
        )


def group_sender(proc: subprocess.Popen[bytes]) -> Deliver:
    """Signals for an app started directly: its whole process group."""

    def deliver(sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass

    return deliver


_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies
    (Linux; elsewhere nothing). The runner asks it of its supervisor (the
    local backend's, or slurmstepd), the app of its runner: a killed
    supervisor or runner leaves no app running beside the next runner."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the app lock still guards
        pass


class AppLock:
    """A lock the app's processes hold while any of them lives (``flock`` on
    ``app.lock`` in the chain directory, its descriptor inherited by the
    app): a runner never starts an app while an earlier one of the chain
    lives, whatever happened to that one's runner."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)

    def acquire(self, *, until: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> bool:
        """Wait for the lock until ``until``; False if an earlier app still holds it."""
        import fcntl

        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if clock() >= until:
                    return False
                sleep(0.5)

    def close(self) -> None:
        """The runner's own copy: the app's inherited one keeps the lock."""
        os.close(self.fd)
