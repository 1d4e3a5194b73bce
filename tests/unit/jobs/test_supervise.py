"""The app's lock (``chain.jobs.supervise.AppLock``): one app at a time in a
working directory, whichever runner started it; ``supervise`` asleep while
the app runs."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chain.core.runner_rules import Schedule
from chain.jobs.supervise import AppEnd, Due, Signals, supervise


def test_the_app_lock_waits_for_an_earlier_app_then_gives_up(tmp_path: Path) -> None:
    """A process that inherited the lock (an earlier app) keeps it after its
    runner's copy is closed; the next runner waits until the stop time."""
    import subprocess
    import sys

    from chain.jobs.supervise import AppLock

    first = AppLock(str(tmp_path / "app.lock"))
    assert first.acquire(until=0, clock=lambda: 0.0, sleep=lambda s: None)
    app = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=(first.fd,))
    first.close()  # the runner's copy: the app still holds the lock
    try:
        now = [0.0]
        second = AppLock(str(tmp_path / "app.lock"))
        assert not second.acquire(until=10, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
        assert now[0] >= 10
    finally:
        app.kill()
        app.wait()
    assert second.acquire(until=0, clock=lambda: 0.0, sleep=lambda s: None)  # the app is gone: free
    second.close()


def _supervised(app: "subprocess.Popen[bytes]", signals: Signals, due: Due | None = None) -> AppEnd:
    """The app supervised with its stop a minute away: it ends on its own."""
    now = time.time()
    return supervise(
        app,
        Schedule(now, now + 60, now + 50, now + 55),
        stop_signal=signal.SIGTERM,
        deliver=lambda sig: None,
        signals=signals,
        clock=time.time,
        say=lambda line: None,
        due=due,
    )


def test_a_signal_the_app_outran_is_still_the_runners_outside_signal() -> None:
    """Slurm sends SIGTERM to every process of a preempted job: the app saved and exited on its own
    copy before the runner's loop passed the runner's on. The runner still records it (and then asks
    whether it was preemption), or the chain cannot tell a preemption from a voluntary exit 99."""
    signals = Signals()

    class Outran(subprocess.Popen[bytes]):
        def wait(self, timeout: float | None = None) -> int:
            code = super().wait(timeout)
            signals.received.append(signal.SIGTERM)  # the runner's copy, while it waited on the app
            return code

    end = _supervised(Outran(["sh", "-c", "exit 99"]), signals)
    assert end.returncode == 99 and end.external == "SIGTERM"


def test_supervision_sleeps_while_the_app_runs_and_leaves_no_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner asks after its app's exit when the kernel says it exited, not
    every 50 ms (Popen.wait with a timeout looked ~30 times a second); the
    pidfd it waits on is closed when the app has ended."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        pytest.skip("no pidfd on this host: supervise waits as Popen.wait does")
    looks: list[int] = []
    real = os.waitpid

    def counted(pid: int, options: int) -> tuple[int, int]:
        looks.append(pid)
        return real(pid, options)

    fds = sorted(os.listdir("/proc/self/fd"))
    app = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.2); raise SystemExit(99)"])
    monkeypatch.setattr(os, "waitpid", counted)
    end = _supervised(app, Signals())
    monkeypatch.undo()
    assert end.returncode == 99 and end.stop_sent is None and not end.killed
    assert len(looks) <= 3, f"{len(looks)} looks at the app in 1.2 s"
    assert sorted(os.listdir("/proc/self/fd")) == fds


def test_what_is_due_is_done_once_while_the_app_runs() -> None:
    """A relay runner's deferred successor: queued once, while the app runs, at its time."""
    done: list[float] = []
    start = time.time()
    end = _supervised(
        subprocess.Popen(["sleep", "1.2"]), Signals(), Due(start + 0.3, lambda until: done.append(time.time()))
    )
    assert end.returncode == 0 and len(done) == 1
    assert 0.3 <= done[0] - start < 1.3


@pytest.mark.parametrize("signalled", [False, True])
def test_nothing_is_due_for_an_app_that_ended_or_was_signalled_first(signalled: bool) -> None:
    """An app that ended before the time (it completed the chain), or that the
    runner signalled first (an outside signal: the runner decides after its end)."""
    done: list[float] = []
    signals = Signals()
    if signalled:
        signals.received.append(signal.SIGTERM)
    app = subprocess.Popen(["sleep", "0.8" if signalled else "0.1"])
    end = _supervised(app, signals, Due(time.time() + 0.4, lambda until: done.append(time.time())))
    assert done == [] and (end.external == "SIGTERM") is signalled


def test_what_is_due_is_given_the_stop_time_and_its_fault_does_not_stop_the_supervision() -> None:
    said: list[str] = []
    until: list[float] = []

    def broken(by: float) -> None:
        until.append(by)
        raise OSError(28, "No space left on device")

    now = time.time()
    end = supervise(
        subprocess.Popen(["sleep", "0.6"]),
        Schedule(now, now + 60, now + 50, now + 55),
        stop_signal=signal.SIGTERM,
        deliver=lambda sig: None,
        signals=Signals(),
        clock=time.time,
        say=said.append,
        due=Due(now + 0.1, broken),
    )
    assert end.returncode == 0 and until == [now + 50]
    assert any("No space left" in line for line in said), said
