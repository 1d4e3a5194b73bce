"""How each rank of a launched run ended, and the runner's judgment from them.

A distributed launcher's own exit code says little of what its workers did:
torchrun exits 1 when a worker exits 99 (a checkpoint), and 1 again when a
worker that finished aborts in its teardown after its last save. So under
``--launcher`` every worker runs through chain's rank wrapper
(``chain.launch.worker``), which records the rank's own end, one small JSON
object per rank, before the interpreter's teardown; the runner judges the
app by those records, the launcher's code only where a rank left none.
Pure: the job reads the files, this module parses and judges.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chain.primitives.codes import ExitCode

MAX_RANKS = 65536  # more ranks than any run launches: a record naming more is not believed
MAX_STEP = 2**53  # a step past any run's (and past a float's exact integers): not believed
# the codes of a rank that ended as the contract intends: done, a checkpoint, a termination warning
_ENDED_WELL = (ExitCode.DONE, ExitCode.STOPPED, ExitCode.TEMPFAIL)


@dataclass(frozen=True)
class RankEnd:
    """One rank's end as its wrapper recorded it."""

    rank: int
    world: int
    exit_code: int
    host: str = ""
    step: int | None = None  # the step it stopped at, as chain.app's adapter noted it (None: no note)
    saved: bool | None = None  # whether the checkpoint of that step was committed before it exited


@dataclass(frozen=True)
class RankProgress:
    """What chain.app's adapter noted of a rank's end, beside the wrapper's record."""

    step: int
    saved: bool


@dataclass(frozen=True)
class RanksJudgment:
    """The exit code the runner judges the app by, and what to say of it ("" if nothing)."""

    exit_code: int
    note: str = ""


def _small_int(value: Any, low: int, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _json_object(text: str) -> Mapping[str, Any] | None:
    """The JSON object ``text`` holds, or None (not JSON, nested past Python's depth, not an object)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, Mapping) else None


def parse_rank_end(text: str) -> RankEnd | None:
    """A rank's record, or None when the text is not one (garbage, a rank
    out of range, codes no process exits with): never an exception."""
    data = _json_object(text)
    if data is None:
        return None
    world = _small_int(data.get("world"), 1, MAX_RANKS)
    rank = _small_int(data.get("rank"), 0, MAX_RANKS - 1)
    code = _small_int(data.get("exit_code"), 0, 255)
    if world is None or rank is None or code is None or rank >= world:
        return None
    host = data.get("host")
    shown = host[:64] if isinstance(host, str) and host.isprintable() else ""
    return RankEnd(rank=rank, world=world, exit_code=code, host=shown)


def parse_rank_progress(text: str) -> RankProgress | None:
    """The adapter's note of a rank's last step (``{"step": N, "saved": B}``),
    or None when the text is not one: never an exception."""
    data = _json_object(text)
    if data is None:
        return None
    step, saved = _small_int(data.get("step"), 0, MAX_STEP), data.get("saved")
    if step is None or not isinstance(saved, bool):
        return None
    return RankProgress(step=step, saved=saved)


def with_progress(end: RankEnd, progress: RankProgress | None) -> RankEnd:
    """``end`` with the adapter's note of its last step, if there is one."""
    if progress is None:
        return end
    return dataclasses.replace(end, step=progress.step, saved=progress.saved)


def _ranks(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:8])
    return shown + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")


def judge_ranks(launcher: str, launcher_code: int, ends: Sequence[RankEnd], world: int) -> RanksJudgment:
    """The code to judge a launched app by: a failed rank's (the lowest
    rank's, named), else, when every one of ``world`` ranks recorded a good
    end, the highest of those (99 over 75 over 0, as the ranks agree on a
    stop), else the launcher's own. A note when that differs from the
    launcher's code, or when ranks left no record."""
    by_rank = {end.rank: end for end in ends if end.rank < world}
    failed = sorted((end for end in by_rank.values() if end.exit_code not in _ENDED_WELL), key=lambda e: e.rank)
    if failed:
        first = failed[0]
        where = f" on {first.host}" if first.host else ""
        return RanksJudgment(first.exit_code, f"rank {first.rank}{where} exited {first.exit_code}")
    missing = [rank for rank in range(world) if rank not in by_rank]
    if missing:
        if launcher_code == 0:
            return RanksJudgment(0)
        return RanksJudgment(
            launcher_code, f"no end recorded by rank {_ranks(missing)} of {world}: judged by {launcher}'s exit"
        )
    code = max(end.exit_code for end in by_rank.values())
    notes = (
        []
        if code == launcher_code
        else [f"{launcher} exited {launcher_code} after every rank exited {_codes(by_rank)}"]
    )
    notes += _step_notes(list(by_rank.values()), code)
    return RanksJudgment(code, "; ".join(notes))


def _step_notes(ends: Sequence[RankEnd], code: int) -> list[str]:
    """What the adapters' notes show wrong: ranks that stopped at different steps (their agreement
    at the step boundary failed), or a stop (99, 75) without the checkpoint of its step."""
    noted = [end for end in ends if end.step is not None]
    notes = []
    steps = sorted({end.step for end in noted if end.step is not None})
    if len(steps) > 1:
        at = (f"{step} (rank {_ranks([e.rank for e in noted if e.step == step])})" for step in steps)
        notes.append("ranks stopped at different steps: " + ", ".join(at))
    unsaved = sorted(end.rank for end in noted if end.saved is False)
    if code != ExitCode.DONE and unsaved:
        notes.append(f"rank {_ranks(unsaved)} stopped without a checkpoint of its last step")
    return notes


def _codes(by_rank: Mapping[int, RankEnd]) -> str:
    codes = sorted({end.exit_code for end in by_rank.values()})
    return " or ".join(str(c) for c in codes)
