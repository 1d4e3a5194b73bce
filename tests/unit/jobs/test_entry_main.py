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


LOOK_PROBE = """
import sys
import chain.backends
import chain.modes.relay


class Looked(Exception):
    pass


def runner_look(self, chain, backend, job_id, seq):
    raise Looked("chain.jobs.runner" in sys.modules, job_id, seq)


chain.modes.relay.RelayMode.runner_look = runner_look
chain.backends.make_backend = lambda name, path, retry=None: object()
from chain.jobs.entry import runner_main

try:
    runner_main(sys.argv[1], None, {"SLURM_JOB_ID": "102", "SLURM_JOB_NAME": sys.argv[2]})
except Looked as looked:
    print(*looked.args)
"""


def test_a_relay_runner_starts_its_accounting_look_before_loading_the_runner(tmp_path: Path) -> None:
    """slurmdbd's answer comes while the runner's code loads (``ModeDriver.runner_look``)."""
    from fakes import FakeBackend

    from chain.core.names import runner_job_name
    from unit.jobs.test_relay import _relay_chain

    _, status = _relay_chain(tmp_path, FakeBackend())
    done = subprocess.run(
        [sys.executable, "-c", LOOK_PROBE, str(tmp_path / ".chain"), runner_job_name(status.chain_id, 2)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["False", "102", "2"], done.stderr
