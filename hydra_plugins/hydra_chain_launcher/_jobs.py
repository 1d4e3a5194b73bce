"""A multirun's jobs as a sweep's points. Pure.

Each job is a point whose directory is the job's Hydra output directory
(``hydra.sweep.subdir``, ``PointEntry.named``) and whose parameters are its
number and overrides (``command.job_point``). Re-running a multirun into the
same ``hydra.sweep.dir`` finds its jobs again by their directories: a job
whose directory holds the same overrides is that point (left alone or
resumed, as ``chain sweep`` does; its number may have moved), a new one is
added, and a directory that holds another job's overrides is refused,
never reused for a different point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from chain.core.settings import Settings
from chain.errors import ConfigError
from chain.sweep.record import PointEntry, SweepRecord
from hydra_plugins.hydra_chain_launcher._command import OVERRIDES_PARAM, job_point


@dataclass(frozen=True)
class HydraJob:
    """One job of the multirun: its number, overrides and directory name."""

    num: int
    overrides: tuple[str, ...]
    subdir: str

    @property
    def entry(self) -> PointEntry:
        return PointEntry.named(self.subdir, job_point(self.num, self.overrides))


@dataclass(frozen=True)
class Merged:
    """The sweep's record with the jobs in it, and the target a resume raises
    it to (None: the same)."""

    record: SweepRecord
    raise_to: int | None = None


def merged(old: SweepRecord | None, settings: Settings, jobs: Sequence[HydraJob], now: float) -> Merged:
    """The record for ``jobs``: a new sweep, or ``old`` with the jobs not in it
    added (its settings must be these, ``max_iter`` raised at most)."""
    if old is None:
        return Merged(SweepRecord.new(settings, [], now).with_entries([job.entry for job in jobs]))
    raise_to = settings_change(old.settings, settings)
    known = {entry.name: entry for entry in old.points}
    added = []
    for job in jobs:
        entry = known.get(job.subdir)
        if entry is None:
            added.append(job.entry)
            continue
        theirs = entry.point.as_dict().get(OVERRIDES_PARAM)
        if theirs != job.entry.point.as_dict()[OVERRIDES_PARAM]:
            raise ConfigError(
                f"job #{job.num}'s directory {job.subdir!r} holds the job {theirs!r} of an earlier run, "
                f"not {' '.join(job.overrides)!r}: give this multirun another hydra.sweep.dir, or "
                "hydra.sweep.subdir=${hydra.job.override_dirname} so that a job keeps its directory"
            )
    return Merged(old.with_entries(added) if added else old, raise_to)


def settings_change(old: Settings, new: Settings) -> int | None:
    """``new``'s max_iter if it raises ``old``'s and nothing else differs; None
    if they are the same; a ``ConfigError`` naming the first other difference."""
    differ = [f.name for f in dataclasses.fields(Settings) if getattr(old, f.name) != getattr(new, f.name)]
    others = [name for name in differ if name != "max_iter"]
    if others:
        app = "the app's command line (python, script, config or hydra overrides)"
        what = app if others[0] == "app_cmd" else others[0]
        raise ConfigError(
            f"the sweep in this hydra.sweep.dir was started with another {what}: its jobs share its settings "
            "(a re-run may raise hydra.launcher.max_iter only); give this multirun another hydra.sweep.dir"
        )
    if new.max_iter < old.max_iter:
        raise ConfigError(
            f"hydra.launcher.max_iter {new.max_iter} is below the sweep's {old.max_iter}: a re-run only raises it"
        )
    return new.max_iter if new.max_iter > old.max_iter else None
