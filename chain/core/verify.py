"""Checkpoints verified before they count: the pure rules.

What makes a checkpoint complete, told from its name and what it holds
(``required_marker``: the file its format writes last), what a resume does
with the newest ones that fail (``plan_resume``: set aside, never deleted,
down to the newest that passes), where they go (``set_aside_name``), and
the structural checks of the formats chain knows (``manifest_sizes``,
``hf_state_problem``). The reading, the ``--verify-cmd`` run and the renames
are the runner's (``chain.jobs.verify``); the counter reader
(``chain.store.counter``) counts only complete checkpoints by the same rules.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from chain.core.counterspec import trailing_integer

SET_ASIDE_DIR = "chain-set-aside"
"""Where a resume moves checkpoints that failed verification (beside them)."""

IGNORED_DIRS = frozenset({SET_ASIDE_DIR, "chain-incomplete"})  # chain.app.hf's own place for unfinished saves
DONE_MARKER = "DONE"  # chain.app's marker, written last (chain.primitives.atomic.DONE_MARKER)
QUARANTINED_SUFFIX = ".corrupt"  # chain.app.store's quarantine of a checkpoint that failed its checksum
TMP_PREFIX = ".tmp-"  # chain.primitives.atomic's temporaries
HF_STATE = "trainer_state.json"  # the Trainer writes it after the weights and the optimizer
_CHAIN_DIR = re.compile(r"ckpt-[0-9]{12}\.d")  # chain.app.store's sharded checkpoint
_HF_DIR = re.compile(r"checkpoint-[0-9]+")  # the Trainer's PREFIX_CHECKPOINT_DIR-<step>
_MAX_SHARDS = 100_000
MAX_TRIED = 16  # checkpoints a resume verifies at most before it says none passes (a command may take minutes each)


class Check(str, enum.Enum):
    """What verifying one checkpoint found."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # the marker its format writes last is missing: a save cut short
    BROKEN = "broken"  # marker present, content not what it says (truncated shard, bad header)
    REJECTED = "rejected"  # --verify-cmd said it is not complete

    @property
    def usable(self) -> bool:
        return self is Check.COMPLETE


@dataclass(frozen=True)
class Candidate:
    """One name the ``glob:`` pattern matched, with its number."""

    path: str
    number: int


@dataclass(frozen=True)
class Verified:
    """A candidate and what its check found (``why``: one line, for the log)."""

    candidate: Candidate
    check: Check
    why: str = ""


@dataclass(frozen=True)
class ResumePlan:
    """What the runner does before the app starts: set ``set_aside`` aside and
    resume from ``resume`` (None: no checkpoint). ``error``: refuse to start,
    nothing moved (no checkpoint passes, and starting afresh would discard the run)."""

    set_aside: tuple[Verified, ...] = ()
    resume: Candidate | None = None
    error: str = ""


def in_ignored_dir(path: str) -> bool:
    """True for a name that is no checkpoint whatever the pattern: inside a
    directory where set-aside checkpoints live, quarantined by ``chain.app``
    (``*.corrupt``) or a writer's temporary (``.tmp-*``)."""
    pure = PurePosixPath(path)
    return (
        any(part in IGNORED_DIRS for part in pure.parts[:-1])
        or pure.name.endswith(QUARANTINED_SUFFIX)
        or pure.name.startswith(TMP_PREFIX)
    )


def candidates(paths: Iterable[str]) -> list[Candidate]:
    """The matched names that carry a number, newest (largest) first; set-aside ones left out."""
    found = [
        Candidate(path, number)
        for path in paths
        if not in_ignored_dir(path) and (number := trailing_integer(path)) is not None
    ]
    return sorted(found, key=lambda c: (-c.number, c.path))


def required_marker(name: str, *, is_dir: bool, has_done: bool) -> str | None:
    """The file whose presence makes a checkpoint complete: ``DONE`` for a
    directory that has one or is chain.app's ``ckpt-N.d``, ``trainer_state.json``
    for a Trainer's ``checkpoint-N``; None when nothing tells (a single file,
    written with a rename by every careful writer, or a directory of a format
    chain does not know: ``--verify-cmd`` says more)."""
    if not is_dir:
        return None
    base = PurePosixPath(name).name
    if has_done or _CHAIN_DIR.fullmatch(base):
        return DONE_MARKER
    if _HF_DIR.fullmatch(base):
        return HF_STATE
    return None


@dataclass(frozen=True)
class Marks:
    """What ``stat`` tells of one candidate: a directory or a regular file
    (neither: not a checkpoint), whether it holds ``DONE``, whether it holds
    the marker its name's format requires (``required_marker``)."""

    candidate: Candidate
    is_dir: bool
    is_file: bool
    has_done: bool = False
    has_marker: bool = False


def marks_complete(marks: Marks, *, marked: bool) -> bool:
    """Complete by its marks. ``marked``: some candidate holds ``DONE``, so the
    app's writer marks its checkpoints, and a directory without one is a
    save cut short (a Trainer's ``checkpoint-N`` whose ``on_save`` never ran)."""
    if not (marks.is_dir or marks.is_file):
        return False
    if marks.is_dir and marked and not marks.has_done:
        return False
    marker = required_marker(marks.candidate.path, is_dir=marks.is_dir, has_done=marks.has_done)
    return marker is None or marks.has_marker


def newest_complete(found: Sequence[Marks]) -> Marks | None:
    """The newest candidate complete by its marks (``found``: newest first)."""
    marked = any(m.has_done for m in found)
    return next((m for m in found if marks_complete(m, marked=marked)), None)


def plan_resume(verified: Sequence[Verified]) -> ResumePlan:
    """From the checks of the newest candidates (newest first, up to and
    including the first that passes): set aside every one before it. When
    none passes, set aside only incomplete ones (saves cut short, which
    count as nothing anyway) and refuse if a complete-looking one failed:
    starting from 0 would silently discard the run."""
    for index, item in enumerate(verified):
        if item.check.usable:
            return ResumePlan(tuple(verified[:index]), item.candidate)
    failed = [v for v in verified if v.check is not Check.INCOMPLETE]
    if failed:
        newest = failed[0]
        return ResumePlan(error=f"no checkpoint passes verification (newest {newest.candidate.path}: {newest.why})")
    return ResumePlan(tuple(verified))


def set_aside_name(path: str, when: int) -> str:
    """Where ``path`` goes when set aside: ``chain-set-aside/<name>.<when>``
    beside it (same directory, so one rename; ``when``: epoch seconds, so a
    name set aside twice is kept twice)."""
    pure = PurePosixPath(path)
    return str(pure.parent / SET_ASIDE_DIR / f"{pure.name}.{when}")


def manifest_sizes(manifest: object) -> dict[str, int] | str:
    """The shard sizes a ``DONE`` manifest lists (``{"files": {rel: {"size": n}}}``),
    or why it cannot be used. A shard's path must stay inside the checkpoint."""
    if not isinstance(manifest, dict):
        return "DONE is not a JSON object"
    files = manifest.get("files", {})
    if not isinstance(files, dict) or len(files) > _MAX_SHARDS:
        return "DONE lists no files object"
    sizes: dict[str, int] = {}
    for rel, entry in files.items():
        parts = PurePosixPath(rel).parts
        if not parts or rel.startswith("/") or ".." in parts:
            return f"DONE names a shard outside the checkpoint: {rel[:60]!r}"
        size = entry.get("size") if isinstance(entry, dict) else None
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            return f"DONE gives shard {rel[:60]!r} no size"
        sizes[rel] = size
    return sizes


def size_problem(expected: Mapping[str, int], found: Mapping[str, int | None]) -> str:
    """The first shard whose size is not the manifest's ("" when all match;
    None in ``found``: missing or not a regular file)."""
    for rel, size in expected.items():
        have = found.get(rel)
        if have is None:
            return f"shard {rel} is missing"
        if have != size:
            return f"shard {rel} has {have} bytes, DONE says {size}"
    return ""


def hf_state_problem(state: object, number: int) -> str:
    """Why a Trainer's ``trainer_state.json`` does not complete ``checkpoint-<number>`` ("" when it does)."""
    if not isinstance(state, dict):
        return f"{HF_STATE} is not a JSON object"
    step = state.get("global_step")
    if isinstance(step, int) and not isinstance(step, bool) and step != number:
        return f"{HF_STATE} says global_step {step}, the name {number}"
    return ""
