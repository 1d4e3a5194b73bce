"""``fork_main``: chain's own code in a forked child, on ``Popen``'s terms."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.primitives.forking import fork_main


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under pytest-xdist a worker has execnet's threads beside the test,
    and ``fork_main`` refuses to fork beside another thread; these children
    run only the tests' own code, never touching those threads' locks."""
    monkeypatch.setattr("chain.primitives.forking.threading.active_count", lambda: 1)


def _reap(pid: int | None) -> int:
    assert pid is not None
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector as the test found it, afterwards."""
    enabled = gc.isenabled()
    try:
        yield
    finally:
        (gc.enable if enabled else gc.disable)()


def test_the_child_runs_main_with_its_args_and_exits_with_its_code(tmp_path: Path) -> None:
    out = tmp_path / "out"

    def main(args: list[str]) -> int:
        print(" ".join(args))
        return 7

    with out.open("w") as fh:
        pid = fork_main(main, ["a", "b"], stdout=fh.fileno())
    assert _reap(pid) == 7
    assert out.read_text() == "a b\n"


def test_an_exception_in_the_child_is_exit_1_with_its_traceback(tmp_path: Path) -> None:
    err = tmp_path / "err"

    def main(_args: list[str]) -> int:
        raise RuntimeError("boom in the child")

    with err.open("w") as fh:
        pid = fork_main(main, [], stderr=fh.fileno())
    assert _reap(pid) == 1
    assert "RuntimeError: boom in the child" in err.read_text()


def test_ignored_signals_are_ignored_in_the_child() -> None:
    def main(_args: list[str]) -> int:
        return 0 if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else 3

    assert _reap(fork_main(main, [], ignore=(signal.SIGHUP,))) == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_the_parent_keeps_its_collector_and_the_child_never_collects(collector: None, enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()

    def main(_args: list[str]) -> int:
        return 5 if gc.isenabled() else 0

    assert _reap(fork_main(main, [])) == 0
    assert gc.isenabled() is enabled


class _Finalized:
    """Garbage in a reference cycle whose finalizer writes to descriptor 1:
    in the child, a collection would run it over the child's own stdout."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        os.write(1, b"finalized\n")


def test_garbage_of_the_parent_is_not_finalized_in_the_child(collector: None) -> None:
    gc.enable()
    read, write = os.pipe()
    try:
        gc.disable()  # the cycle is garbage at the fork, not collected yet
        _Finalized()
        gc.enable()

        def main(_args: list[str]) -> int:
            for _ in range(100_000):  # allocations that would trigger a collection
                [[]]  # noqa: B018
            gc.collect() if gc.isenabled() else None
            return 0

        assert _reap(fork_main(main, [], stdout=write)) == 0
        os.set_blocking(read, False)
        with pytest.raises(BlockingIOError):
            os.read(read, 100)  # nothing written in the child
    finally:
        gc.collect()  # the parent finalizes it, on its own stdout
        os.close(read)
        os.close(write)
