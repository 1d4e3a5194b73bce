"""The ``chain`` command line: adapts library calls; ``ChainGroup``
(``chain.cli.group``) maps errors to one line and an exit code.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from chain import __version__
from chain.cli.group import ChainGroup
from chain.cli.options import setting_flags, with_setting_options
from chain.errors import ChainError
from chain.primitives.codes import CliExit
from chain.primitives.interrupt import interrupted

app = typer.Typer(
    cls=ChainGroup,
    name="chain",
    help="Run a long computation on Slurm as a self-driving chain of checkpointed jobs.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # inherited by every command's context: `chain submit -h` too
    context_settings={"help_option_names": ["-h", "--help"]},
)

_sleep = time.sleep  # the pause between refreshes (tests interrupt it)

ChainDirOpt = typer.Option(None, "--chain-dir", metavar="DIR", help="Chain directory [default: .chain, or $CHAIN_DIR].")
ConfigOpt = typer.Option(
    None, "--config", metavar="FILE", help="TOML settings file [default: ./chain.toml if present]."
)
OutOpt = typer.Option(
    None,
    "--out",
    metavar="DIR",
    help="Write submitter.sbatch and runner.sbatch (and mail.sbatch with --mail-user) here.",
)
DirectoriesArg = typer.Argument(
    None, help="Search these (4 levels deep) [default: the chains you submitted from this machine]."
)


def _cwd() -> Path:
    return Path.cwd()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"chain {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """chain: submitter/runner job chains for Slurm (and a local stand-in)."""


def _at_least(low: int) -> Callable[[int | None], int | None]:
    """An INT option's bound, checked here: typer's min= would show
    ``<int range>`` and ``[x>=N]`` in the help where the rest says ``INT``."""

    def check(value: int | None) -> int | None:
        if value is not None and value < low:
            raise typer.BadParameter(f"{value} is less than {low}")
        return value

    return check


def _notify(line: str) -> None:
    typer.echo(f"chain: {line}", err=True)


@app.command()
@with_setting_options
def submit(
    config: Path | None = ConfigOpt,
    chain_dir: str | None = ChainDirOpt,
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the chain in --chain-dir from its checkpoint, "
        "with its stored settings (flags given here change them).",
    ),
    new: bool = typer.Option(
        False,
        "--new",
        help="Start a new chain where an ended one is (the old chain directory is kept as DIR.<chain id>).",
    ),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="Stay and show progress until the chain ends; exit 0 only if "
        "it completed (10 failed, 11 stopped, 12 cancelled).",
    ),
    reset_excluded: bool = typer.Option(
        False,
        "--reset-excluded",
        help="With --resume: use again the nodes the chain excluded after runners stalled or lost a node there.",
    ),
    **settings: Any,
) -> None:
    """Submit a new chain (or --resume a stopped one); prints the chain id and job id.

    The app must follow the contract: read its counter from $CKPT_PATH and
    resume, write the counter there after each checkpoint, and on the stop
    signal (SIGTERM) checkpoint and exit 99; exit 0 at $MAX_ITER (README.md,
    "The app contract"; docs/app-contract.md).

    Every setting is an option, an environment variable or a chain.toml key
    (flag > environment > file > default)."""
    from chain import api

    cwd = _cwd()
    result = api.submit(
        setting_flags(settings),
        os.environ,
        config=config,
        chain_dir=api.chain_dir_path(chain_dir, cwd),
        workdir=cwd,
        resume=resume,
        new=new,
        notify=_notify,
        reset_excluded=reset_excluded,
    )
    try:  # a ^C from here on, even while these lines are written, stops the watching only
        typer.echo(f"chain {result.chain_id}: {result.job_kind} job {result.job_id} on {result.backend} ({result.why})")
        typer.echo(f"chain directory: {result.chain_dir}")
        if wait:
            code = _watch_until_ended(result.chain_dir, 1.0, None)
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not (wait and interrupted(exc)):
            raise
        code = _stopped_watching(result.chain_dir, "chain status --watch")
    if wait:
        raise typer.Exit(code)


@app.command()
@with_setting_options
def render(
    config: Path | None = ConfigOpt,
    chain_dir: str | None = ChainDirOpt,
    out: Path | None = OutOpt,
    **settings: Any,
) -> None:
    """Print the sbatch scripts exactly as `chain submit` would submit them.

    Takes every setting `chain submit` takes. Where --chain-dir holds a
    chain, renders that chain's stored settings (flags change them, as on
    --resume)."""
    from chain import api

    cwd = _cwd()
    scripts = api.render_chain(
        setting_flags(settings),
        os.environ,
        config=config,
        chain_dir=api.chain_dir_path(chain_dir, cwd),
        cwd=cwd,
        notify=_notify,
    )
    named = [("submitter.sbatch", scripts.submitter), ("runner.sbatch", scripts.runner)]
    if scripts.mail:
        named.append(("mail.sbatch", scripts.mail))
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in named:
                (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ChainError(f"cannot write to {out}: {exc.strerror}") from None
        typer.echo("wrote " + " and ".join(str(out / name) for name, _ in named))
        return
    for name, text in named:
        typer.echo(f"# ---- {name} ----")
        typer.echo(text, nl=False)


@app.command()
def status(
    chain_dir: str | None = ChainDirOpt,
    as_json: bool = typer.Option(False, "--json", help="One JSON object."),
    watch: bool = typer.Option(False, "--watch", help="Refresh until the chain ends."),
    history: int | None = typer.Option(
        None,
        "--history",
        metavar="INT",
        callback=_at_least(0),
        help="Runners listed (0 or more): 10 in the table, all in --json unless given.",
    ),
) -> None:
    """State, progress, submitter and runner jobs, recent outcomes."""
    from chain import api

    directory = api.chain_dir_path(chain_dir, _cwd())
    if watch:
        raise typer.Exit(_watch(directory, interval=2.0, history=history))
    if as_json:
        # compact: the C encoder (indent= falls back to pure Python, 4x slower)
        typer.echo(json.dumps(api.status_report(directory, history=history).to_json(), default=str))
        return
    from chain.cli.status_view import print_status

    shown = 10 if history is None else history
    print_status(api.status_report(directory, history=shown), history=shown)


def _watch(directory: Path, interval: float, history: int | None = None) -> int:
    """Refresh until the chain ends: the full view on a terminal, one line
    per change otherwise (logs and CI stay readable). Returns the exit code
    of the final state: 0 only for a completed chain; 130 on Ctrl-C."""
    try:
        return _watch_until_ended(directory, interval, history)
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not interrupted(exc):
            raise
        return _stopped_watching(directory, "chain status --watch")


def _stopped_watching(directory: Path, again: str) -> int:
    """Ctrl-C stops the watching, not the chain: say so, and how to watch
    again; exit 130 as for any interrupted command."""
    import shlex

    newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    typer.echo(
        f"{newline}chain: stopped watching; the chain goes on (its jobs keep running). "
        f"Watch it again with: {again} --chain-dir {shlex.quote(str(directory))}",
        err=True,
    )
    return CliExit.INTERRUPTED


def _watch_until_ended(directory: Path, interval: float, history: int | None) -> int:
    from chain import api
    from chain.cli.status_view import print_status, progress_line
    from chain.core.model import ChainState

    rows = 10 if history is None else history
    rows_on_screen = 5 if history is None else history  # the view must fit a terminal
    last = ""
    while True:
        report = api.status_report(directory, history=rows, watching=True)
        ended = report.state.ended
        if sys.stdout.isatty():
            typer.echo("\x1b[2J\x1b[H", nl=False)
            print_status(report, history=rows_on_screen)
        else:
            line = progress_line(report)
            if line != last:
                typer.echo(f"[{time.strftime('%H:%M:%S')}] {line}")
                last = line
            if ended:
                print_status(report, history=rows)
        if ended:
            api.wait_jobs_gone(directory)  # the directory is the user's once --wait returns
            return report.state.exit_code
        # nothing of it runs (cancelled outside chain, or its jobs failed before chain started
        # in them): no end would ever come to watch
        stuck = ChainState.CANCELLED.exit_code if report.cancelled_outside else CliExit.SCHEDULER
        if report.cancelled_outside or report.cannot_start:
            if not sys.stdout.isatty():
                print_status(report, history=rows)
            return stuck
        _sleep(interval)


@app.command()
def cancel(chain_dir: str | None = ChainDirOpt) -> None:
    """Stop the submitter and runner (the app gets SIGTERM to checkpoint)."""
    from chain import api

    typer.echo(api.cancel(api.chain_dir_path(chain_dir, _cwd())))


@app.command()
def report(
    chain_dir: str | None = ChainDirOpt,
    quiet: bool = typer.Option(False, "--quiet", help="Only write the files."),
) -> None:
    """Usage table (CSV) and progress plot (PNG), mid-chain or after."""
    from chain import api
    from chain.reporting.report import make_report

    directory = api.chain_dir_path(chain_dir, _cwd())
    api.open_chain(directory)  # one-line error when there is no chain
    paths = make_report(directory, echo=not quiet)
    for path in paths:
        typer.echo(f"wrote {path}")


@app.command()
def logs(
    chain_dir: str | None = ChainDirOpt,
    runner_seq: int | None = typer.Option(
        None,
        "--runner",
        metavar="INT",
        callback=_at_least(1),
        help="Runner N's output (N from 1) [the current runner's].",
    ),
    submitter: bool = typer.Option(False, "--submitter", help="The submitter's output instead."),
    follow_: bool = typer.Option(False, "--follow", "-f", help="Keep printing, across runners, until the chain ends."),
) -> None:
    """Print a runner's Slurm output (the current one's by default)."""
    from chain import api
    from chain.api import logs as logs_api

    directory = api.chain_dir_path(chain_dir, _cwd())
    if follow_:
        if runner_seq is not None:
            raise ChainError("--follow follows the current runner; it takes no --runner")
        try:
            logs_api.follow(directory, lambda text: typer.echo(text, nl=False), submitter=submitter, sleep=_sleep)
        except (KeyboardInterrupt, RuntimeError) as exc:
            if not interrupted(exc):
                raise
            raise typer.Exit(
                _stopped_watching(directory, "chain logs --follow" + (" --submitter" if submitter else ""))
            ) from None
        return
    view = api.open_chain(directory)
    chain = view.chain
    source = logs_api.submitter_log(view) if submitter else logs_api.runner_log(chain, view.status, runner_seq)
    typer.echo(f"==> {source.what}: {source.path} <==", err=True)
    typer.echo(logs_api.read_output(chain, source), nl=False)


@app.command("list")
def list_chains(
    directories: list[Path] | None = DirectoriesArg,
    as_json: bool = typer.Option(False, "--json", help="A JSON list."),
) -> None:
    """The chains under DIRECTORIES, or the ones you submitted here: state, progress, rate, ETA."""
    from chain.api import listing

    dirs = listing.find_chains(directories) if directories else listing.registered(os.environ)
    rows = listing.list_rows(dirs)
    if as_json:
        typer.echo(json.dumps([row.to_json() for row in rows]))
        return
    from chain.cli.status_view import print_chain_list

    print_chain_list(rows)


from chain.cli.sweep import sweep_app

app.add_typer(sweep_app, name="sweep")


@app.command("shell-helpers")
def shell_helpers() -> None:
    """Print the directory holding chain.sh and chain.R (source them in apps)."""
    from chain.primitives.paths import shell_helpers_dir

    typer.echo(str(shell_helpers_dir({})))


@app.command("_submitter", hidden=True)
def _submitter(chain_dir: str = typer.Option(..., "--chain-dir")) -> None:
    from chain.jobs.entry import submitter_main

    raise typer.Exit(submitter_main(chain_dir))


@app.command("_runner", hidden=True)
def _runner(
    chain_dir: str = typer.Option(..., "--chain-dir"),
    preflight_error: str | None = typer.Option(None, "--preflight-error"),
) -> None:
    from chain.jobs.entry import runner_main

    raise typer.Exit(runner_main(chain_dir, preflight_error))


def main() -> None:
    """Console entry point: one line per error, never a traceback."""
    from chain.effects.appenv import private_umask
    from chain.primitives.interrupt import interrupt_as_chain

    interrupt_as_chain()  # before any import that may build a dataclass: see primitives.interrupt.Interrupted
    private_umask(os.environ)  # the chain's files are its user's alone; the app keeps the user's umask
    app(prog_name="chain")
