"""The app's lock (``chain.jobs.supervise.AppLock``): one app at a time in a
working directory, whichever runner started it."""

from pathlib import Path


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
