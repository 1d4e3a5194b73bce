"""``Sweep``: a directory of chains, one per point of a parameter grid.

    from chain import Sweep

    sweep = Sweep.submit("runs/lr", grid={"lr": [1e-3, 3e-4], "seed": [0, 1, 2]},
                         app_cmd="python3 ../../train.py --lr {lr} --seed {seed}",
                         max_iter=500, runner_time="4:00:00")
    sweep.wait()
    sweep.report()

Each point is a chain (``Chain``) whose working directory is the point's own
directory under the sweep's (``chain.sweep.store``); the app runs there.
Every method reads the points' own files; ``status`` asks the scheduler once
for the whole sweep (``chain.api.sweep.stranded_chains``). ``chain sweep``
only adapts these calls; errors are ``ChainError``s.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from chain.api.config import LimitsMemo
from chain.api.config import _check_program as check_program
from chain.api.handle import Chain, _check_setting_names
from chain.api.listing import list_rows
from chain.api.status import StatusReport
from chain.api.sweep import Driven, readable_status, stranded_chains, wait_all
from chain.backends.base import Backend
from chain.core.fields import FIELD_BY_NAME
from chain.core.resolution import resolve
from chain.core.settings import Launcher, Settings
from chain.errors import ChainDirError, ChainError, ConfigError
from chain.store import ChainStatus
from chain.sweep.command import point_command, substitute
from chain.sweep.params import Point, Scalar, checked_points, grid_from_toml, identity, points_from_toml
from chain.sweep.record import PointEntry, SweepRecord
from chain.sweep.report import SweepReport
from chain.sweep.spec import SweepSpec, sweep_points
from chain.sweep.store import SweepDir, read_sweep_file
from chain.sweep.table import PointRow, PointState, SweepStatus, point_row

PARALLEL = 4  # sbatch calls (or cancels) at once
T = TypeVar("T")


class Sweep:
    """A sweep directory: submit, look at, wait for, cancel, resume, extend, report."""

    def __init__(self, directory: str | os.PathLike[str], *, backend: Backend | None = None) -> None:
        self.directory = Path(directory).resolve()
        self._store = SweepDir(self.directory)
        self._backend = backend  # None: each chain's own (tests and embedding give one)
        self._store.read()  # a one-line error when there is no sweep

    @classmethod
    def submit(
        cls,
        directory: str | os.PathLike[str] = ".",
        *,
        grid: Mapping[str, Sequence[Scalar]] | None = None,
        points: Sequence[Mapping[str, Scalar]] | None = None,
        sweep_file: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        backend: str | Backend | None = None,
        parallel: int = PARALLEL,
        on_message: Callable[[str], None] | None = None,
        **settings: Any,
    ) -> Sweep:
        """Start a sweep in ``directory`` (created if missing): one chain per point.

        The points are the ``grid``'s combinations, the ``points`` given, or
        the ``sweep_file``'s (its ``[grid]`` or ``[[point]]`` tables); its other
        keys are settings. ``settings`` by their TOML names are shared by every
        point and beat ``environ`` (by default none), which beats the file.
        ``app_cmd``'s ``{name}`` placeholders take each point's values. A
        ``ChainError`` names the points that could not be submitted (the others
        run; ``resume`` submits the missing ones)."""
        _check_parallel(parallel)
        given = backend if isinstance(backend, Backend) else None
        if isinstance(backend, str):
            settings["backend"] = backend
        _check_setting_names(settings)
        spec = read_sweep_file(Path(sweep_file)) if sweep_file is not None else SweepSpec()
        chosen = _given_points(spec, grid, points)
        shared = resolve(
            settings, environ or {}, spec.settings, file_label=f"sweep file {sweep_file}" if sweep_file else "sweep"
        )
        record = SweepRecord.new(shared, chosen, time.time())  # every check before anything is made
        store = SweepDir(Path(directory).resolve())
        store.make()  # its own lock: two sweeps made side by side do not wait on their parent's
        with store.locked():
            if store.exists():
                raise ChainDirError(
                    f"{store.root} holds a sweep already: chain sweep add adds points to it, "
                    "chain sweep resume continues it"
                )
            store.write(record)
            sweep = cls(store.root, backend=given)
            sweep._submit_new(record, record.points, parallel, on_message)
        return sweep

    @classmethod
    def open(cls, directory: str | os.PathLike[str] = ".", *, backend: Backend | None = None) -> Sweep:
        """The sweep in ``directory``."""
        return cls(directory, backend=backend)

    @property
    def record(self) -> SweepRecord:
        """The sweep's record as it is now (``sweep.json``)."""
        return self._store.read()

    def point_dir(self, name: str) -> Path:
        """The working directory of the point named ``name``."""
        return self._store.point_dir(self._entry(name))

    def chains(self) -> dict[str, Chain]:
        """The points' chains by point name (a point not submitted has none)."""
        found = {}
        for entry in self.record.points:
            directory = self._store.chain_dir(entry)
            if (directory / "state.json").is_file():
                found[entry.name] = Chain(directory, backend=self._backend)
        return found

    def status(self) -> SweepStatus:
        """Every point's row: its chain's own files, and one scheduler query
        for all the chains not over (a chain nothing drives says why)."""
        record = self.record
        dirs = {entry.name: self._store.chain_dir(entry) for entry in record.points}
        statuses = {d: readable_status(d) for d in dirs.values() if (d / "state.json").is_file()}
        live: dict[Path, ChainStatus] = {d: s for d, s in statuses.items() if s is not None and not s.state.ended}
        driven = stranded_chains(live, self._backend) if live else Driven()
        listed = dict(zip(statuses, list_rows(statuses)))
        rows = tuple(
            point_row(
                entry,
                listed.get(dirs[entry.name]),
                driven.stranded.get(dirs[entry.name], ""),
                driven.waiting.get(dirs[entry.name], ""),
            )
            for entry in record.points
        )
        return SweepStatus(str(self.directory), rows, driven.error)

    def wait(
        self,
        timeout: float | None = None,
        poll: float = 10.0,
        *,
        check: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> list[StatusReport]:
        """Wait until every submitted point's chain has ended (``Chain.wait_all``)."""
        chains = list(self.chains().values())
        return wait_all(
            chains, timeout=timeout, poll=poll, check=check, sleep=sleep, clock=clock, backend=self._backend
        )

    def cancel(self, *, parallel: int = 8) -> list[str]:
        """Cancel every point's chain that is not over; one line per point.
        A ``ChainError`` after all were tried names the ones that failed."""
        from chain.api.cancelling import cancel

        _check_parallel(parallel)
        targets = [
            (row.name, self._store.chain_dir(self._entry(row.name)))
            for row in self.status().rows
            if row.state.active or row.state is PointState.UNREADABLE
        ]
        return _each(targets, lambda d: cancel(d, backend=self._backend), parallel, "cancelled")

    def resume(
        self,
        *,
        max_iter: int | None = None,
        parallel: int = PARALLEL,
        on_message: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Continue every point that has not completed (its chain resumed; a
        point never submitted, submitted); ``max_iter`` raises the sweep's
        target, and a completed point short of it is continued too. Points
        still running are left alone. One line per point acted on."""
        _check_parallel(parallel)
        with self._store.locked():
            record = self.record
            if max_iter is not None:
                record = self._raised(record, max_iter)
            rows = self.status().rows
            todo = [row for row in rows if _needs_resume(row, record.settings.max_iter)]
            fresh = [r for r in todo if r.state is PointState.NOT_SUBMITTED]
            target = record.settings.max_iter
            limits = LimitsMemo()

            def again(row: PointRow) -> None:
                # a point short of the sweep's target is raised to it (a completed chain goes on only so)
                overrides: dict[str, Any] = {"max_iter": target} if row.max_iter < target else {}
                chain = Chain(self._store.chain_dir(self._entry(row.name, record)), backend=self._backend)
                chain.resume(on_message=on_message, limits=limits, **overrides)

            steps = [
                lambda: _each([(r.name, r) for r in todo if r not in fresh], again, parallel, "resumed"),
                lambda: self._submit_new(
                    record, [self._entry(r.name, record) for r in fresh], parallel, on_message, limits
                ),
            ]
            return _all_of(steps)

    def add(
        self,
        *,
        grid: Mapping[str, Sequence[Scalar]] | None = None,
        points: Sequence[Mapping[str, Scalar]] | None = None,
        sweep_file: str | os.PathLike[str] | None = None,
        parallel: int = PARALLEL,
        on_message: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Add points to the sweep and submit them; points already in it are
        left alone. The sweep's settings apply: a ``sweep_file`` whose settings
        differ from them is refused. The names of the points added."""
        _check_parallel(parallel)
        spec = read_sweep_file(Path(sweep_file)) if sweep_file is not None else SweepSpec()
        chosen = _given_points(spec, grid, points)
        with self._store.locked():
            record = self.record
            _check_same_settings(spec.settings, record.settings, str(sweep_file))
            known = {identity(entry.point) for entry in record.points}
            new = [point for point in chosen if identity(point) not in known]
            if not new:
                return []
            extended = record.with_points(new)
            self._store.write(extended)
            entries = list(extended.points[len(record.points) :])
            self._submit_new(extended, entries, parallel, on_message)
        return [entry.name for entry in entries]

    def report(self, *, now: float | None = None) -> SweepReport:
        """Write ``report/sweep.csv`` and ``report/sweep.png``: their paths,
        and the points by the metric their reports know (``chain.sweep.report``)."""
        from chain.sweep.report import write_sweep_report

        return write_sweep_report(self._store, self.record, self.status(), now=now)

    def _entry(self, name: str, record: SweepRecord | None = None) -> PointEntry:
        for entry in (record or self.record).points:
            if entry.name == name:
                return entry
        raise ConfigError(f"no point {name!r} in the sweep {self.directory}")

    def _raised(self, record: SweepRecord, max_iter: int) -> SweepRecord:
        """The record with its target raised to ``max_iter`` (never lowered), saved."""
        if max_iter < record.settings.max_iter:
            raise ConfigError(
                f"--max-iter {max_iter} is below the sweep's {record.settings.max_iter}: a resume only raises it"
            )
        settings = resolve({"max_iter": max_iter}, {}, {}, record.settings)
        raised = SweepRecord(settings, record.points, record.created)
        self._store.write(raised)
        return raised

    def _submit_new(
        self,
        record: SweepRecord,
        entries: Sequence[PointEntry],
        parallel: int,
        on_message: Callable[[str], None] | None,
        limits: LimitsMemo | None = None,
    ) -> list[str]:
        """Submit the points' chains (each directory and params.json made first),
        ``parallel`` at once; a ``ChainError`` names the points that failed.
        ``limits``: the batch's memo, when the caller has one (a resume)."""
        shared = record.settings
        limits = limits or LimitsMemo()  # the site's job limits asked once for the points, not once a point

        def submit(entry: PointEntry) -> str:
            workdir = self._store.prepare_point(entry)
            # submit checks the program of the whole command: export, behind which the app's own hides
            check_program(dataclasses.replace(shared, app_cmd=substitute(shared.app_cmd, entry.point)), workdir)
            command = point_command(shared.app_cmd, entry.point, entry.name, export=shared.launcher is Launcher.NONE)
            settings = {**shared.to_json(), "app_cmd": command}
            backend = self._backend or settings.pop("backend")
            settings.pop("backend", None)
            Chain.submit(workdir, backend=backend, on_message=on_message, limits=limits, **settings)
            return "submitted"

        try:
            return _each([(e.name, e) for e in entries], submit, parallel, "submitted")
        except ChainError as exc:
            raise ChainError(f"{exc}; the others run: chain sweep resume submits the missing points") from None

    def __repr__(self) -> str:
        return f"Sweep({str(self.directory)!r})"


def _given_points(
    spec: SweepSpec, grid: Mapping[str, Sequence[Scalar]] | None, points: Sequence[Mapping[str, Scalar]] | None
) -> list[Point]:
    """The points from exactly one source: the file's, ``grid`` or ``points``."""
    given = [g for g in (grid, points) if g is not None]
    if len(given) > 1 or (given and spec.points):
        raise ConfigError("give the points one way: a grid, a list of points, or a sweep file's")
    if grid is not None:
        return grid_from_toml({k: list(v) for k, v in grid.items()}, "grid")
    if points is not None:
        return points_from_toml([dict(p) for p in points], "point")
    return checked_points(sweep_points(spec, []), "sweep")


def _check_same_settings(values: Mapping[str, Any], stored: Settings, label: str) -> None:
    """Each setting the file gives is the sweep's (added points share its settings)."""
    for name, raw in values.items():
        spec = FIELD_BY_NAME[name]
        if spec.convert(raw, f"{label}: {name}") != getattr(stored, name):
            raise ConfigError(
                f"{label}: {name} differs from the sweep's; added points take the sweep's settings "
                "(start another sweep for other settings)"
            )


def _check_parallel(parallel: int) -> None:
    if parallel < 1:
        raise ConfigError(f"--parallel must be at least 1, got {parallel}")


def _needs_resume(row: PointRow, max_iter: int) -> bool:
    if row.state is PointState.COMPLETED:
        return row.max_iter < max_iter
    return not row.state.active or bool(row.stranded)


def _all_of(steps: Sequence[Callable[[], list[str]]]) -> list[str]:
    """Every step's lines; the steps' errors in one ``ChainError`` after all ran."""
    lines: list[str] = []
    errors: list[str] = []
    for step in steps:
        try:
            lines += step()
        except ChainError as exc:
            errors.append(str(exc))
    if errors:
        raise ChainError("; ".join(errors))
    return lines


def _each(targets: Sequence[tuple[str, T]], act: Callable[[T], object], parallel: int, done: str) -> list[str]:
    """``act`` on each point's target, ``parallel`` at once; one line per point.
    A ``ChainError`` naming the failed points after all were tried."""

    def one(target: tuple[str, T]) -> str | ChainError:
        name, thing = target
        try:
            result = act(thing)
        except ChainError as exc:
            return ChainError(f"{name}: {exc}")
        return f"{name}: {result if isinstance(result, str) else done}"

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(one, targets))
    failed = [str(r) for r in results if isinstance(r, ChainError)]
    if failed:
        more = "; ..." if len(failed) > 3 else ""
        raise ChainError(f"{len(failed)} of {len(targets)} points were not {done} ({'; '.join(failed[:3])}{more})")
    return [r for r in results if isinstance(r, str)]
