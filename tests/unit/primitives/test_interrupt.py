"""The command's ^C: chain's own KeyboardInterrupt class keeps CPython from
turning a caught ^C into a death by SIGINT at exit (see
``chain.primitives.interrupt.Interrupted``). The interpreter's behaviour is reproduced
deterministically: the ^C lands inside a string ``exec`` (as while a
dataclass is built), the program catches it and exits 7, run with ``-m``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import sigint_default

from chain.primitives import interrupt

PROGRAM = """\
import os, signal, sys
{install}
try:
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(1000): pass")
except KeyboardInterrupt:
    sys.exit(7)
"""


def _run_as_module(tmp_path: Path, install: str) -> int:
    (tmp_path / "ctrlc_probe.py").write_text(PROGRAM.format(install=install), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "ctrlc_probe"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=sigint_default,
    )
    return proc.returncode


def test_a_bare_keyboard_interrupt_through_exec_kills_a_module_with_sigint(tmp_path: Path) -> None:
    """The interpreter's flaw this guards against: caught, and still -2."""
    assert _run_as_module(tmp_path, "") == -signal.SIGINT


def test_chains_interrupt_is_caught_and_the_chosen_code_stands(tmp_path: Path) -> None:
    setup = "from chain.primitives.interrupt import interrupt_as_chain; interrupt_as_chain()"
    assert _run_as_module(tmp_path, setup) == 7


def test_interrupted_is_a_keyboard_interrupt() -> None:
    assert issubclass(interrupt.Interrupted, KeyboardInterrupt)
    assert interrupt.Interrupted is not KeyboardInterrupt


def test_an_ignored_sigint_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupt.interrupt_as_chain()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_pythons_own_handler_is_replaced() -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupt.interrupt_as_chain()
        with pytest.raises(interrupt.Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a bytecode boundary for the handler to run at
    finally:
        signal.signal(signal.SIGINT, previous)


class _SetName:
    """A descriptor whose ``__set_name__`` is where the ^C lands (as in a
    dataclass field while a module is imported)."""

    def __set_name__(self, owner: type, name: str) -> None:
        raise interrupt.Interrupted


def test_a_ctrl_c_inside_set_name_is_still_an_interrupt() -> None:
    # Python 3.11 wraps it in RuntimeError(...) from it; 3.12+ lets it through with a note
    with pytest.raises((RuntimeError, KeyboardInterrupt)) as raised:

        class Built:
            field = _SetName()

    assert interrupt.interrupted(raised.value)
    assert not interrupt.interrupted(RuntimeError("a bug"))
    assert not interrupt.interrupted(ValueError("x"))


@pytest.mark.parametrize("wrapped", [False, True])
def test_watching_stops_with_one_line_and_130_however_the_ctrl_c_surfaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrapped: bool
) -> None:
    from _chains import make_chain
    from typer.testing import CliRunner

    from chain.cli import commands
    from chain.core.model import ChainState

    def interrupted_watch(*args: object) -> int:
        if wrapped:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from interrupt.Interrupted()
        raise interrupt.Interrupted

    make_chain(tmp_path, 1, ChainState.RUNNING)
    monkeypatch.setattr(commands, "_watch_until_ended", interrupted_watch)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(commands.app, ["status", "--watch"])
    assert result.exit_code == 130, result.output
    assert "chain: stopped watching; the chain goes on" in result.stderr
    assert "internal error" not in result.output + result.stderr
