"""The command line a new user meets: a closed pipe, -h and the exported
errors, one name per runner, Ctrl-C while watching, the help's INT, and the
status view without rich off a
terminal (the 0.25 s target) but with it on one."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from _chains import make_chain
from fakes import sigint_default
from typer.testing import CliRunner

from chain.cli import commands, status_view
from chain.cli.commands import app
from chain.core.model import ChainState
from chain.store import ChainDir

runner = CliRunner()
CHAIN = [sys.executable, "-m", "chain"]


def _commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(
        name
        for name, cmd in group.commands.items()  # type: ignore[attr-defined]
        if not cmd.hidden
    )


# --- item 5: -h, and the error family ----------------------------------------------


@pytest.mark.parametrize("name", [None, *_commands()])
def test_dash_h_is_help(name: str | None) -> None:
    argv = [name] if name else []
    short = runner.invoke(app, [*argv, "-h"], env={"COLUMNS": "100"})
    long = runner.invoke(app, [*argv, "--help"], env={"COLUMNS": "100"})
    assert short.exit_code == 0 and long.exit_code == 0, short.stderr
    assert short.stdout == long.stdout and short.stdout.startswith("Usage: chain")
    assert "-h, --help" in short.stdout


# --- item 4: a closed stdout ends quietly with 0 -----------------------------------


def _closed_reader(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` writing into a pipe whose reader has gone (as after ``head``)."""
    proc = subprocess.Popen([*CHAIN, *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    return subprocess.CompletedProcess(argv, proc.wait(timeout=60), "", err)


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["status", "--json"],
        ["--help"],
        ["submit", "--help"],
        ["logs"],
        ["list", "."],
        ["render", "--app-cmd", "x"],
    ],
)
def test_a_closed_stdout_ends_any_command_quietly(tmp_path: Path, argv: list[str]) -> None:
    chain_dir = make_chain(tmp_path, 3, ChainState.COMPLETED)
    ChainDir(chain_dir).runner_output("12").write_text("a line of output\n" * 20_000)  # more than a pipe holds
    done = _closed_reader(argv, tmp_path)
    assert done.returncode == 0, (argv, done.returncode, done.stderr)
    assert "error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_pipefail_script_goes_on_after_head(tmp_path: Path) -> None:
    chain_dir = make_chain(tmp_path, 3, ChainState.COMPLETED)
    ChainDir(chain_dir).runner_output("12").write_text("a line of output\n" * 20_000)
    chain_cmd = " ".join(CHAIN)
    script = (
        f"set -o pipefail; {chain_cmd} status | head -n 1 && {chain_cmd} logs 2>/dev/null | head -n 1 && echo went-on"
    )
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.splitlines() == [
        "chain chain-abcdef  completed  (local backend)",
        "a line of output",
        "went-on",
    ], done.stderr
    assert "Traceback" not in done.stderr and "error" not in done.stderr


def test_a_broken_pipe_through_the_cli_runner_is_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    make_chain(tmp_path, 3, ChainState.COMPLETED)

    def closed(*_: Any, **__: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(status_view, "print_status", closed)
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0 and result.stderr == ""


# --- item 8: one number per runner ---------------------------------------------------


def test_a_failed_runner_is_named_by_its_number_and_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chain_dir = make_chain(tmp_path, 3, ChainState.FAILED, job_base=40)  # runner 3 is job 42
    ChainDir(chain_dir).runner_output("42").write_text("Traceback: boom\n")
    shown = runner.invoke(app, ["status"], env={"COLUMNS": "120"}).stdout
    assert "runner 3 (job 42) output:" in shown and "runner 42" not in shown, shown
    logs = runner.invoke(app, ["logs"])
    assert "==> runner 3 (job 42):" in logs.stderr


# --- item 11: Ctrl-C while watching --------------------------------------------------


def _interrupted(_: float) -> None:
    raise KeyboardInterrupt


def test_ctrl_c_in_status_watch_says_the_chain_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chain_dir = make_chain(tmp_path, 2, ChainState.RUNNING)
    monkeypatch.setattr(commands, "_sleep", _interrupted)
    result = runner.invoke(app, ["status", "--watch"])
    assert result.exit_code == 130
    assert "the chain goes on" in result.stderr and "its jobs keep running" in result.stderr
    assert f"chain status --watch --chain-dir {chain_dir}" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_ctrl_c_in_submit_wait_says_the_chain_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chain import api
    from chain.api.submission import Submitted

    monkeypatch.chdir(tmp_path)
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    monkeypatch.setattr(api, "submit", lambda *_, **__: Submitted("chain-abcdef", "5", "local", "asked", chain_dir))
    monkeypatch.setattr(commands, "_sleep", _interrupted)
    result = runner.invoke(app, ["submit", "--app-cmd", "x", "--wait"])
    assert result.exit_code == 130 and "chain chain-abcdef: submitter job 5" in result.stdout
    assert (
        f"the chain goes on (its jobs keep running). Watch it again with: chain status --watch "
        f"--chain-dir {chain_dir}" in result.stderr
    )


def test_ctrl_c_in_logs_follow_says_the_chain_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    monkeypatch.setattr(commands, "_sleep", _interrupted)
    result = runner.invoke(app, ["logs", "--follow"])
    assert result.exit_code == 130 and f"chain logs --follow --chain-dir {chain_dir}" in result.stderr


def test_sigint_to_a_watching_process(tmp_path: Path) -> None:
    """A real ^C: the process prints its first refresh, gets SIGINT, and
    ends with the one line and 130."""
    make_chain(tmp_path, 2, ChainState.RUNNING)
    proc = subprocess.Popen(
        [*CHAIN, "status", "--watch"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,  # noqa: PLW1509 - no threads in the test process here
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "running" in first, first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err
    assert "stopped watching; the chain goes on" in err and "chain status --watch --chain-dir" in err


# --- item 14: INT in the help; submit points to the app contract -----------------------


@pytest.mark.parametrize("name", _commands())
def test_integer_options_say_int(name: str) -> None:
    out = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout
    for typer_word in ("<int range>", "INTEGER", "[x>=", "[x<="):
        assert typer_word not in out, (name, typer_word)


def test_int_bounds_are_in_words_and_checked() -> None:
    status = runner.invoke(app, ["status", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--history INT" in status and "0 or more" in status
    logs = runner.invoke(app, ["logs", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--runner INT" in logs and "N from 1" in logs
    bad = runner.invoke(app, ["logs", "--runner", "0"])
    assert bad.exit_code == 2 and bad.stderr.strip() == "chain: error: Invalid value for '--runner': 0 is less than 1"


def test_submit_help_points_to_the_app_contract() -> None:
    out = " ".join(runner.invoke(app, ["submit", "--help"], env={"COLUMNS": "200"}).stdout.split())
    for words in ("$CKPT_PATH", "exit 99", "exit 0 at $MAX_ITER", "The app contract", "docs/app-contract.md"):
        assert words in out, words
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert "## The app contract" in readme


# --- start-up: plain text off a terminal, rich on one ------------------------------------


def test_status_off_a_terminal_does_not_import_rich(tmp_path: Path) -> None:
    make_chain(tmp_path, 3, ChainState.COMPLETED)
    probe = (
        "import sys\nfrom chain.cli import main\nsys.argv = ['chain', 'status']\ntry:\n    main()\n"
        "except SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'),"
        " file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"
    assert "runners (last 3 of 3)" in done.stdout and "99020->99030" in done.stdout


def _on_a_terminal(argv: list[str], cwd: Path) -> str:
    """``argv``'s output with a pseudo-terminal as its stdout."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen(argv, cwd=cwd, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    out = b""
    while True:  # read as it comes: a full pty would block the child
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    proc.wait(timeout=30)
    return out.decode("utf-8", "replace")


def test_status_on_a_terminal_keeps_the_rich_view(tmp_path: Path) -> None:
    make_chain(tmp_path, 3, ChainState.COMPLETED)
    shown = _on_a_terminal([*CHAIN, "status"], tmp_path)
    assert "┏" in shown and "│" in shown and "\x1b[" in shown, shown  # boxed table, colours
    assert "99020->99030" in shown


def test_the_plain_and_the_rich_view_say_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from chain import api

    make_chain(tmp_path, 4, ChainState.FAILED)
    report = api.status_report(tmp_path / ".chain", history=3)
    buffer = io.StringIO()
    status_view.print_status(report, history=3, console=Console(file=buffer, width=120, highlight=False))
    rich_words = buffer.getvalue().translate({ord(c): " " for c in "┏┳┓┃┡╇┩│└┴┘━─╸╺"}).split()
    monkeypatch.chdir(tmp_path)
    plain = runner.invoke(app, ["status", "--history", "3"], env={"COLUMNS": "120"}).stdout
    bar_free = [w for w in plain.split() if not w.startswith("[#")]
    assert [w for w in rich_words if set(w) != {"━"}] == bar_free
    assert json.loads(runner.invoke(app, ["status", "--json"]).stdout)["state"] == "failed"
