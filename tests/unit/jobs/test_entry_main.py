"""The jobs' own entry (``chain.jobs.entry.main``): what the sbatch scripts'
last line runs, without the CLI's typer; errors as the CLI reports them.
Each call runs in a child Python: ``main`` sets the process's umask, its
``CHAIN_APP_UMASK`` and its ^C handler, as a job's process needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chain.jobs import entry
from chain.primitives.codes import CliExit

ROOT = str(Path(entry.__file__).parents[2])
PROBE = (
    "import sys\nfrom chain.jobs.entry import main\ncode = main(sys.argv[1:])\nprint(code, 'typer' in sys.modules)\n"
)


def _main(*argv: str) -> tuple[int, bool, str]:
    """``main(argv)`` in a child: its code, whether typer was imported, its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=60,
        check=False,
    )
    code, typer = done.stdout.split()
    return int(code), typer == "True", done.stderr


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["_runner"], "--chain-dir is required"),
        (["_runner", "--chain-dir"], "--chain-dir needs a value"),
        (["_submitter", "--chain-dir", "x", "--preflight-error", "y"], "no such option '--preflight-error'"),
        (["_runner", "--chain-dir", "x", "--bogus"], "no such option '--bogus'"),
        (["status"], "not a job command"),
    ],
)
def test_a_bad_job_command_line_is_one_line_and_exit_2(argv: list[str], words: str) -> None:
    code, _, err = _main(*argv)
    assert code == 2
    assert err.startswith("chain: error: ") and words in err and err.count("\n") == 1


def test_both_option_spellings_are_read() -> None:
    assert entry._parse(["_runner", "--chain-dir=/a", "--preflight-error", "b=c"]) == (
        "_runner",
        {"--chain-dir": "/a", "--preflight-error": "b=c"},
    )


def test_a_missing_chain_is_a_chain_error_without_typer_or_a_traceback(tmp_path: Path) -> None:
    code, typer, err = _main("_submitter", "--chain-dir", str(tmp_path / "nothing"))
    assert code not in (0, CliExit.BUG) and not typer
    assert err.startswith("chain: error: ") and "Traceback" not in err


def test_python_m_chain_runs_the_job_command_without_typer(tmp_path: Path) -> None:
    """The scripts' line, as a job runs it: answered without importing typer."""
    probe = (
        "import runpy, sys; sys.argv = ['chain', '_runner', '--chain-dir', sys.argv[1]]\n"
        "try:\n    runpy.run_module('chain', run_name='__main__')\n"
        "except SystemExit as exit:\n    print(exit.code, 'typer' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "nothing")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert done.stderr.startswith("chain: error: ")
