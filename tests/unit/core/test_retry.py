"""The chain's own writes ride out a file system that refuses them for a
while: ``RetryPolicy.for_storage`` with injected clock
and sleep (no test really waits), and ``ChainDir`` against a real immutable
``state.json`` (chattr +i) that the injected sleep makes writable again."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import SteppingClock

from chain.core.model import ChainState
from chain.core.retry import STORAGE_PATIENCE, RetryPolicy, TransientError
from chain.store import ChainDir, ChainStatus


def _failing(errors: list[OSError]) -> object:
    def write() -> str:
        if errors:
            raise errors.pop(0)
        return "written"

    return write


def test_a_full_disk_for_a_while_is_ridden_out() -> None:
    t = SteppingClock()
    policy = RetryPolicy.for_storage(sleep=t.sleep, clock=t.clock)
    write = _failing([OSError(errno.ENOSPC, "No space left on device"), OSError(errno.EROFS, "Read-only")])
    assert policy.call(write) == "written"  # type: ignore[arg-type]
    assert len(t.slept) == 2 and all(0 <= s <= 15 for s in t.slept)


def test_a_refusal_longer_than_the_patience_fails() -> None:
    t = SteppingClock()
    policy = RetryPolicy.for_storage(sleep=t.sleep, clock=t.clock)
    forever = [OSError(errno.EPERM, "Operation not permitted") for _ in range(10_000)]
    with pytest.raises(PermissionError):
        policy.call(_failing(forever))  # type: ignore[arg-type]
    assert STORAGE_PATIENCE <= t.now <= STORAGE_PATIENCE + 15, t.now
    assert len(forever) > 9_000, "it kept trying long after the patience"


def test_other_errors_are_not_repeated() -> None:
    t = SteppingClock()
    policy = RetryPolicy.for_storage(sleep=t.sleep, clock=t.clock)
    with pytest.raises(FileNotFoundError):
        policy.call(_failing([FileNotFoundError(errno.ENOENT, "gone")]))  # type: ignore[arg-type]
    assert t.slept == []


def test_a_call_that_succeeds_at_once_never_imports_tenacity() -> None:
    """The runner's every scheduler call goes through a policy: the import
    is paid only when a try fails (a fresh interpreter shows it)."""
    code = (
        "import sys\n"
        "from chain.core.retry import RetryPolicy, TransientError\n"
        "assert RetryPolicy().call(lambda: 7) == 7\n"
        "print('tenacity' in sys.modules)\n"
        "tries = [TransientError('Slurmctld is busy')]\n"
        "def once():\n"
        "    if tries:\n"
        "        raise tries.pop()\n"
        "    return 8\n"
        "assert RetryPolicy(sleep=lambda s: None).call(once) == 8\n"
        "print('tenacity' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["False", "True"]


def test_the_first_failure_is_tenacitys_first_attempt() -> None:
    """Numbered, waited for and bounded as before: the first try's own time
    counts towards ``max_delay``, its failure is attempt 1."""
    t = SteppingClock()
    said: list[str] = []

    def slow_busy() -> str:
        t.now += 50.0  # a try that hangs most of the budget
        raise TransientError("Slurmctld is busy")

    policy = RetryPolicy(attempts=8, max_delay=120.0, sleep=t.sleep, clock=t.clock)
    with pytest.raises(TransientError):
        policy.call(slow_busy, on_retry=said.append)
    assert said[0] == "attempt 1 failed: Slurmctld is busy"
    assert len(said) == 2 and len(t.slept) == 2, "the first try's time was not counted"
    assert RetryPolicy(attempts=1, sleep=t.sleep).call(lambda: "at once") == "at once"
    with pytest.raises(TransientError):
        RetryPolicy(attempts=1, sleep=t.sleep).call(slow_busy)
    assert len(t.slept) == 2, "one attempt allowed, and it was repeated"


def _need_chattr(path: Path) -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root: chattr +i must be available")
        pytest.skip("chattr +i needs root")
    probe = path / "probe"
    probe.write_text("x")
    if subprocess.run(["chattr", "+i", str(probe)], check=False, capture_output=True).returncode != 0:
        pytest.fail(f"chattr +i does not work on {path}")
    subprocess.run(["chattr", "-i", str(probe)], check=True)


def test_an_immutable_state_file_is_saved_once_it_is_writable_again(tmp_path: Path) -> None:
    _need_chattr(tmp_path)
    root = tmp_path / ".chain"
    root.mkdir()
    status = ChainStatus(chain_id="c-1")
    ChainDir(root).save_status(status)
    subprocess.run(["chattr", "+i", str(root / "state.json")], check=True)
    released: list[float] = []

    def sleep(seconds: float) -> None:  # the admin's chattr -i, while chain waits
        released.append(seconds)
        subprocess.run(["chattr", "-i", str(root / "state.json")], check=True)

    chain = ChainDir(root, storage=RetryPolicy.for_storage(sleep=sleep))
    status.state = ChainState.RUNNING
    try:
        chain.save_status(status)
    finally:
        subprocess.run(["chattr", "-i", str(root / "state.json")], check=False)
    assert released, "the first write did not meet the immutable file"
    loaded = chain.load_status()
    assert loaded is not None and loaded.state is ChainState.RUNNING


def test_an_unwritable_chain_log_never_fails_the_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _need_chattr(tmp_path)
    root = tmp_path / ".chain"
    root.mkdir()
    chain = ChainDir(root)
    chain.log("first")
    subprocess.run(["chattr", "+i", str(chain.log_file)], check=True)
    try:
        chain.log("second", echo=False)
    finally:
        subprocess.run(["chattr", "-i", str(chain.log_file)], check=False)
    assert "cannot write" in capsys.readouterr().err
    assert chain.log_file.read_text().count("\n") == 1
