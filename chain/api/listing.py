"""``chain list``: the chains under some directories, or the ones this user
submitted from this machine (a small registry under the user's state
directory: ``$XDG_STATE_HOME/chain/chains`` or ``~/.local/state/chain/chains``,
one chain directory per line, appended at submit, pruned of directories
that no longer hold a chain)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.errors import ChainError, ConfigError

SEARCH_DEPTH = 4  # directories below each given one that are searched
STATE_NAMES = ("state.json", "settings.json")  # what makes a directory a chain directory


@dataclass(frozen=True)
class ChainRow:
    """One line of ``chain list``."""

    directory: str
    chain_id: str
    mode: str
    state: str
    iteration: int
    max_iter: int
    rate_per_hour: float | None
    eta_seconds: float | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def registry_path(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_STATE_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".local" / "state")
    return Path(base) / "chain" / "chains"


def register(chain_dir: Path, environ: Mapping[str, str]) -> None:
    """Remember a submitted chain; best effort (a read-only home must not
    fail a submit)."""
    path = registry_path(environ)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, f"{chain_dir}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def registered(environ: Mapping[str, str]) -> list[Path]:
    """The registered chain directories that still hold a chain, pruning the
    others from the registry."""
    path = registry_path(environ)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    seen: dict[str, None] = {}
    for line in lines:
        if line.strip() and _is_chain_dir(Path(line.strip())):
            seen.setdefault(line.strip(), None)
    if len(seen) != len(lines):
        _rewrite(path, list(seen))
    return [Path(p) for p in seen]


def _rewrite(path: Path, entries: list[str]) -> None:
    from chain.primitives import atomic

    try:
        atomic.write_text_atomic(path, "".join(f"{e}\n" for e in entries), mode=0o600)
    except OSError:
        pass


def find_chains(roots: Iterable[Path], depth: int = SEARCH_DEPTH) -> list[Path]:
    """Chain directories under ``roots`` (to ``depth`` levels), skipping what
    cannot be read and not following symlinks."""
    found: dict[Path, None] = {}
    for root in roots:
        if not root.is_dir():  # a directory named wrong (missing, /dev/null) is bad input: exit 2
            raise ConfigError(f"{root} is not a directory")
        for path in _walk(root, depth):
            found.setdefault(path.resolve(), None)
    return sorted(found)


def _walk(directory: Path, depth: int) -> Iterator[Path]:
    if _is_chain_dir(directory):
        yield directory
        return
    if depth <= 0:
        return
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path), depth - 1)
        except OSError:
            continue


def _is_chain_dir(path: Path) -> bool:
    try:
        return all((path / name).is_file() for name in STATE_NAMES)
    except OSError:
        return False


def list_rows(chain_dirs: Iterable[Path], *, now: float | None = None) -> list[ChainRow]:
    """One row per chain, from its own files only (no scheduler call, no
    counter command): its state file, four keys of its settings, its counter
    as ``chain status`` shows it (``store.counter.known_counter``) and its
    last few runners, so a thousand chains list in well under a second. A
    chain that cannot be read is shown with its error as the reason."""
    import time

    when = time.time() if now is None else now
    rows = []
    for directory in chain_dirs:
        try:
            rows.append(_row(Path(directory), when))
        except ChainError as exc:
            rows.append(ChainRow(str(directory), "?", "?", "unreadable", 0, 0, None, None, str(exc)))
    return rows


def _row(directory: Path, now: float) -> ChainRow:
    from chain.core.records import RunnerView
    from chain.reporting.metrics import RECENT_RUNNERS, progress_metrics
    from chain.store.view import ChainView

    view = ChainView.open(directory)  # a corrupt settings.json: a ChainDirError, the row says so
    status, iteration = view.status, view.counter
    metrics: Mapping[str, float | None] = {"rate_per_hour": None, "eta_seconds": None}
    if not status.state.ended:
        runners, _ = view.recent_runners(RECENT_RUNNERS + 1)
        metrics = progress_metrics(RunnerView.window(runners, view.current_runner()), iteration, view.max_iter, now)
    return ChainRow(
        str(directory),
        status.chain_id,
        view.mode.value,
        status.state.value,
        iteration,
        view.max_iter,
        metrics["rate_per_hour"],
        metrics["eta_seconds"],
        status.reason,
    )
