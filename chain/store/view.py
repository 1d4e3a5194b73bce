"""The one read model of a chain directory (``ChainView``): its status, its
settings, its counter as chain last knew it, its live jobs and its runners,
read the same way by ``chain status``, ``chain list``, ``chain logs``,
``chain cancel``, the report and the jobs' start-up. It reads only.

Two ways to read the settings, for two kinds of reader: ``settings()`` is
the whole validated record (what a job runs with, what ``chain status``
shows), a damaged ``settings.json`` a one-line error; ``max_iter``,
``mode`` and ``counter`` read only the few keys a listing or a report needs,
so a chain whose settings are damaged is still listed and reported."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.core.records import JudgedRunner, RunnerRecord
from chain.core.resolution import from_json
from chain.core.settings import Mode, Settings
from chain.core.status import ChainStatus
from chain.errors import ChainDirError, ChainError, ConfigError
from chain.store.chaindir import ChainDir
from chain.store.counter import counter_settings, known_counter


@dataclass(frozen=True)
class ChainView:
    """A chain directory as read once (``open``); ``status`` is what
    ``state.json`` held then."""

    chain: ChainDir
    status: ChainStatus
    stored: Mapping[str, Any] = field(default_factory=dict)  # settings.json as read; {} when unreadable

    @classmethod
    def open(cls, chain_dir: str | os.PathLike[str], *, lenient: bool = False) -> ChainView:
        """The chain in ``chain_dir`` (a one-line error when there is none, or
        its settings.json is damaged; ``lenient``: then read as {})."""
        path = Path(chain_dir)
        chain = ChainDir(path)
        if not path.exists():
            raise ChainDirError(f"no chain in {path} (directory does not exist)")
        status = chain.load_status()
        if status is None:
            raise ChainDirError(f"no chain in {path} (no state.json)")
        return cls(chain, status, stored_values(chain, lenient=lenient))

    def settings(self) -> Settings:
        """The chain's stored settings, validated (a one-line error when damaged),
        from what ``open`` read: settings.json is not read twice."""
        if not self.stored:  # missing, not an object, or unreadable: read again for its one-line error
            return stored_settings(self.chain)
        return _validated(self.chain, self.stored)

    @property
    def max_iter(self) -> int:
        return stored_max_iter(self.stored)

    @property
    def mode(self) -> Mode:
        try:
            return Mode(self.stored.get("mode", Mode.SUBMITTER.value))
        except ValueError:
            return Mode.SUBMITTER

    @property
    def counter(self) -> int:
        """The counter as chain last knew it (``store.counter.known_counter``): no program run."""
        return known_counter(self.status.iteration, self.status.workdir, **counter_settings(self.stored))

    @property
    def live_jobs(self) -> list[str]:
        return self.status.live_jobs()

    def current_runner(self) -> RunnerRecord | None:
        """The live runner's own record, if it wrote one yet."""
        status = self.status
        return self.chain.runner_record(status.runner_job_id) if status.runner_live and status.runner_job_id else None

    def recent_runners(self, count: int) -> tuple[list[JudgedRunner], int]:
        """The last ``count`` judged runners, and how many there are."""
        return self.chain.recent_runners(count)


def stored_max_iter(stored: Mapping[str, Any]) -> int:
    """MAX_ITER as ``settings.json`` holds it (read leniently: 0 when it does not)."""
    value = stored.get("max_iter")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def stored_settings(chain: ChainDir) -> Settings:
    """The chain's stored settings, validated again (never trusted): a
    missing or damaged ``settings.json`` is a one-line ``ChainDirError``."""
    try:
        data = chain.read_settings()
    except FileNotFoundError:
        raise ChainDirError(f"{chain.root} holds no chain settings (settings.json missing)") from None
    return _validated(chain, data)


def _validated(chain: ChainDir, data: Any) -> Settings:
    try:
        return from_json(data)
    except ConfigError as exc:
        raise ChainDirError(f"{chain.settings_file} is invalid: {exc}") from None


def stored_values(chain: ChainDir, *, lenient: bool = False) -> dict[str, Any]:
    """``settings.json`` as read, for the readers of a few keys: {} when it
    is not there or not an object; refused or corrupt, a ``ChainDirError``
    (``lenient``: {} too)."""
    try:
        data = chain.read_settings()
    except FileNotFoundError:
        return {}
    except (OSError, ChainError):
        if lenient:
            return {}
        raise
    return data if isinstance(data, dict) else {}
