"""``chain sweep``: a sweep of chains from the command line. Adapts ``Sweep``
(``chain.api.sweep_handle``); errors are ``ChainError``s, mapped by ``ChainGroup``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from chain.cli.group import ChainGroup
from chain.cli.options import setting_flags, with_setting_options

if TYPE_CHECKING:
    from chain.sweep.table import PointRow, SweepStatus

sweep_app = typer.Typer(
    cls=ChainGroup,
    name="sweep",
    help="A sweep: one chain per point of a parameter grid, seen and driven as one.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

DirOpt = typer.Option(Path("."), "--dir", metavar="DIR", help="The sweep's directory [default: the current one].")
FileArg = typer.Argument(
    None, metavar="[FILE]", help="Sweep file: chain settings, and a [grid] table or [[point]] tables."
)
ParamOpt = typer.Option(
    None,
    "--param",
    metavar="NAME=VALUES",
    help="A parameter and its values (lr=1e-3,3e-4; seed=0..2: 0 to 2); repeatable, every combination is a point.",
)
ParallelOpt = typer.Option(4, "--parallel", metavar="INT", help="Submissions at once.")


def _notify(line: str) -> None:
    typer.echo(f"chain: {line}", err=True)


def _points(sweep_file: Path | None, params: list[str] | None) -> dict[str, Any]:
    """The keyword that gives ``Sweep`` its points: the file's, or the flags' grid."""
    from chain.sweep.params import grid_from_flags
    from chain.sweep.spec import sweep_points
    from chain.sweep.store import read_sweep_file

    if not params:
        return {}
    spec = read_sweep_file(sweep_file) if sweep_file is not None else None
    sweep_points(spec, params)  # the file has none of its own, and the flags are good
    return {"points": [point.as_dict() for point in grid_from_flags(params)]}


@sweep_app.command("submit")
@with_setting_options
def submit(
    sweep_file: Path | None = FileArg,
    params: list[str] | None = ParamOpt,
    directory: Path = DirOpt,
    parallel: int = ParallelOpt,
    **settings: Any,
) -> None:
    """Submit a sweep: one chain per point, each in DIR/<point name>, where its app runs.

    {name} in the app command is the point's value (shell-quoted); the app
    also gets CHAIN_PARAM_<NAME> and params.json in its directory. Settings:
    flag > environment > sweep file > default."""
    from chain.api.sweep_handle import Sweep

    sweep = Sweep.submit(
        directory,
        sweep_file=sweep_file,
        environ=os.environ,
        parallel=parallel,
        on_message=_notify,
        **_points(sweep_file, params),
        **setting_flags(settings),
    )
    names = sweep.record.names()
    typer.echo(f"sweep {sweep.directory}: {len(names)} points submitted")


@sweep_app.command("add")
def add(
    sweep_file: Path | None = FileArg,
    params: list[str] | None = ParamOpt,
    directory: Path = DirOpt,
    parallel: int = ParallelOpt,
) -> None:
    """Add points to a sweep and submit them (points already in it are left alone)."""
    from chain.api.sweep_handle import Sweep

    sweep = Sweep.open(directory)
    added = sweep.add(sweep_file=sweep_file, parallel=parallel, on_message=_notify, **_points(sweep_file, params))
    for name in added:
        typer.echo(f"{name}: submitted")
    typer.echo(f"sweep {sweep.directory}: {len(added)} points added, {len(sweep.record.points)} in all")


@sweep_app.command("status")
def status(
    directory: Path = DirOpt,
    as_json: bool = typer.Option(False, "--json", help="One JSON object."),
) -> None:
    """Every point in one table: state, progress, rate, ETA, last reason (one scheduler query)."""
    from chain.api.sweep_handle import Sweep

    report = Sweep.open(directory).status()
    if as_json:
        typer.echo(json.dumps(report.to_json()))
        return
    print_sweep_status(report)


@sweep_app.command("wait")
def wait(
    directory: Path = DirOpt,
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS", help="Give up after this long."),
) -> None:
    """Wait until every point's chain has ended; exit 0 only if all completed."""
    from chain.api.sweep_handle import Sweep

    sweep = Sweep.open(directory)
    sweep.wait(timeout=timeout, poll=2.0, check=30.0)
    report = sweep.status()
    print_sweep_status(report)
    raise typer.Exit(0 if all(row.state.done for row in report.rows) else 1)


@sweep_app.command("cancel")
def cancel(directory: Path = DirOpt) -> None:
    """Cancel every point's chain that is not over (each app gets its stop signal)."""
    from chain.api.sweep_handle import Sweep

    for line in Sweep.open(directory).cancel():
        typer.echo(line)


@sweep_app.command("resume")
def resume(
    directory: Path = DirOpt,
    max_iter: int | None = typer.Option(
        None, "--max-iter", metavar="INT", help="Raise the sweep's MAX_ITER (completed points short of it go on too)."
    ),
    parallel: int = ParallelOpt,
) -> None:
    """Continue the points that did not complete (a point never submitted is submitted)."""
    from chain.api.sweep_handle import Sweep

    lines = Sweep.open(directory).resume(max_iter=max_iter, parallel=parallel, on_message=_notify)
    for line in lines:
        typer.echo(line)
    typer.echo(f"{len(lines)} points resumed")


@sweep_app.command("report")
def report(
    directory: Path = DirOpt,
    quiet: bool = typer.Option(False, "--quiet", help="Only write the files."),
) -> None:
    """One CSV of every point and one figure (progress over time, state counts)."""
    from chain.api.sweep_handle import Sweep

    written = Sweep.open(directory).report()
    if not quiet and written.metric:
        print_metric_table(written.metric)
    for path in written.paths:
        typer.echo(f"wrote {path}")


def print_sweep_status(report: SweepStatus) -> None:
    """The sweep's table: a row per point, then the state counts."""
    from chain.cli.status_view import Line, TableItem, show
    from chain.cli.table_layout import Column
    from chain.core.timefmt import format_duration
    from chain.reporting.metrics import format_rate

    rows = report.rows
    columns = [
        Column("point", [r.name for r in rows]),
        Column("state", [r.state.value for r in rows]),
        Column("progress", [f"{r.iteration}/{r.max_iter}" if r.chain_id else "-" for r in rows]),
        Column("rate", [format_rate(r.rate_per_hour) if r.rate_per_hour else "-" for r in rows], keep=1),
        Column("ETA", [format_duration(r.eta_seconds) if r.eta_seconds is not None else "-" for r in rows], keep=2),
        Column("reason", [_reason(r) for r in rows], kind="text"),
    ]
    counts = ", ".join(f"{n} {state}" for state, n in report.counts.items() if n)
    items: list[Any] = [TableItem(f"sweep {report.directory}: {len(rows)} points ({counts or 'none'})", columns)]
    if report.scheduler_error:
        items.append(Line(((f"scheduler not asked: {report.scheduler_error}", "yellow"),)))
    show(items)


def _reason(row: PointRow) -> str:
    """Why the point is where it is: nothing drives it, what it waits on, or its chain's reason."""
    if row.stranded:
        return f"nothing drives it: {row.stranded}"
    return row.waiting or row.reason


def print_metric_table(metric: tuple[tuple[str, float], ...]) -> None:
    """The points by the metric of their reports, the best first."""
    from chain.cli.status_view import TableItem, show
    from chain.cli.table_layout import Column

    show(
        [
            TableItem(
                "points by efficiency",
                [Column("point", [n for n, _ in metric]), Column("efficiency", [f"{v:.1%}" for _, v in metric])],
            )
        ]
    )
