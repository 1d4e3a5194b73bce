"""The in-job entry points: what ``chain _submitter`` and ``chain _runner``
(the last line of the rendered sbatch scripts) run inside a job.
``python -m chain`` hands those two to ``main`` before the CLI is imported:
typer and its generated options cost a runner about 0.6 s of its slot when
16 jobs start at once on 2 CPUs (``bench/sweep.py``). The CLI's hidden
commands of the same names adapt the same functions (``chain.cli.commands``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from chain.backends.base import Backend
from chain.core.settings import Settings
from chain.errors import ChainError, ProtocolError, bug_line, error_line
from chain.primitives.codes import CliExit
from chain.store import ChainDir

JOB_COMMANDS = ("_runner", "_submitter")


def main(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> int:
    """``chain _runner|_submitter --chain-dir DIR [--preflight-error TEXT]``
    as the job's script runs it; its exit code. Errors as the CLI reports
    them: one line, the ``ChainError``'s code, ``CliExit.BUG`` for a fault
    (``CHAIN_DEBUG=1``: the traceback)."""
    from chain.effects.appenv import private_umask
    from chain.primitives.interrupt import interrupt_as_chain, interrupted

    interrupt_as_chain()
    private_umask(os.environ)  # the chain's files are its user's alone; the app keeps the user's umask
    try:
        command, options = _parse(argv)
        if command == "_submitter":
            return submitter_main(options["--chain-dir"], environ)
        return runner_main(options["--chain-dir"], options.get("--preflight-error"), environ)
    except ChainError as exc:
        print(error_line(exc), file=sys.stderr, flush=True)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return CliExit.INTERRUPTED
    except Exception as exc:  # a bug: still one line, the traceback on request
        if interrupted(exc):
            return CliExit.INTERRUPTED
        if environ.get("CHAIN_DEBUG"):
            raise
        print(bug_line(exc), file=sys.stderr, flush=True)
        return CliExit.BUG


def _parse(argv: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The job command and its options (``--name VALUE`` or ``--name=VALUE``)."""
    from chain.errors import ConfigError

    if not argv or argv[0] not in JOB_COMMANDS:
        raise ConfigError(f"not a job command: {' '.join(argv[:1])!r}")
    allowed = {"--chain-dir", "--preflight-error"} if argv[0] == "_runner" else {"--chain-dir"}
    options: dict[str, str] = {}
    rest = list(argv[1:])
    while rest:
        name, _, value = rest.pop(0).partition("=")
        if name not in allowed:
            raise ConfigError(f"{argv[0]}: no such option {name!r}")
        if not _:
            if not rest:
                raise ConfigError(f"{argv[0]}: {name} needs a value")
            value = rest.pop(0)
        options[name] = value
    if "--chain-dir" not in options:
        raise ConfigError(f"{argv[0]}: --chain-dir is required")
    return argv[0], options


def job_context(chain_dir: str) -> tuple[ChainDir, Settings, Backend, Path]:
    """Inside a job: the chain directory, its stored settings, the backend
    it was submitted with, and the app's working directory."""
    from chain.backends import make_backend
    from chain.core.retry import RetryPolicy
    from chain.store.view import ChainView

    path = Path(chain_dir)
    view = ChainView.open(path)
    chain, settings, status = view.chain, view.settings(), view.status
    # Short per-request retries: the submitter rides out longer outages in its
    # own loop, where it also keeps an eye on its hand-over deadline.
    retry = RetryPolicy.for_jobs(settings.submitter_margin)
    return chain, settings, make_backend(status.backend, path, retry), Path(status.workdir)


def submitter_main(chain_dir: str, environ: Mapping[str, str] = os.environ) -> int:
    """The submitter job; its exit code."""
    from chain.jobs.sigterm import restart_count
    from chain.jobs.submitter import Submitter
    from chain.primitives.output import keep_job_output

    keep_job_output()  # a full disk under the job's log must not end the submitter
    chain, settings, backend, workdir = job_context(chain_dir)
    submitter = Submitter(
        chain,
        settings,
        backend,
        workdir,
        environ.get("SLURM_JOB_ID", ""),
        job_name=environ.get("SLURM_JOB_NAME", ""),
        restarts=restart_count(environ),
    )
    try:
        return submitter.run()
    except ProtocolError as exc:
        return leave_an_ended_chain(chain, f"submitter {submitter.job_id}", exc)


def runner_main(chain_dir: str, preflight_error: str | None, environ: Mapping[str, str] = os.environ) -> int:
    """A runner job; its exit code as the job's (``job_exit_code``). The
    mode's accounting look (``ModeDriver.runner_look``) is started before
    the runner's code is imported: slurmdbd's answer takes ~0.1 s, most of
    it waiting, which the imports fill."""
    from chain.core.names import runner_seq
    from chain.jobs.supervise import die_with_parent
    from chain.modes import driver
    from chain.primitives.output import keep_job_output

    die_with_parent(signal.SIGTERM)  # a killed supervisor stops this runner, and so its app
    keep_job_output()  # a full disk under the job's log must not end the runner
    chain, settings, backend, workdir = job_context(chain_dir)
    job_id, job_name = environ.get("SLURM_JOB_ID", "0"), environ.get("SLURM_JOB_NAME", "")
    look = driver(settings.mode).runner_look(chain, backend, job_id, runner_seq(job_name))
    from chain.core.runner_rules import job_exit_code
    from chain.jobs import runner

    try:
        code = runner.run(
            chain,
            settings,
            backend,
            job_id=job_id,
            job_name=job_name,
            workdir=workdir,
            preflight_error=preflight_error,
            look=look,
        )
    except ProtocolError as exc:
        code = leave_an_ended_chain(chain, f"runner job {job_id}", exc)
    return job_exit_code(code)


def leave_an_ended_chain(chain: ChainDir, who: str, refused: ProtocolError) -> int:
    """A job whose event was refused because another process ended the chain
    first (``chain cancel`` beside a save: the executor's compare-and-save)
    has nothing left to do: it says so and leaves (0). Any other refusal
    is a fault in chain, raised."""
    status = chain.load_status()
    if status is None or not status.state.ended:
        raise refused
    chain.log(f"{who}: the chain was {status.state.value} by another process meanwhile; leaving")
    return 0
