"""The ranks of one distributed run (DDP, FSDP) under a chain: what they must
agree on at a step boundary, and the note of its end each rank leaves for
the runner. Standard library and chain.primitives only; the torch adapter
fills the collectives from ``torch.distributed`` (``chain.app.torch.torch_ranks``).

The stop signal, a deadline or a checkpoint interval may reach the ranks at
different steps (srun signals every task, torchrun forwards to each child,
clocks differ by milliseconds): if one rank stopped and the others went on,
the others would hang in the next collective until the job's time limit.
So at every step boundary the ranks all-reduce their wishes (save? exit,
with which code?) with a maximum: a save or a stop wanted by any rank is
done by all, at the same step. Rank 0 then writes the checkpoint and the
counter once; the others wait for it at a barrier, so none exits (or goes
on) before the checkpoint is durable.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.primitives.atomic import write_text_atomic
from chain.primitives.paths import RANK_PROGRESS

__all__ = ["SINGLE", "Ranks", "agree", "note_end"]

log = logging.getLogger(__name__)


def _same(values: Sequence[int]) -> list[int]:
    return list(values)


def _nothing() -> None:
    return None


def _alone(obj: Any) -> list[Any]:
    return [obj]


@dataclass(frozen=True)
class Ranks:
    """This process's place among the ranks and the collectives the adapters
    need: an element-wise maximum over all ranks (``all_max``), a barrier,
    and every rank's object in rank order (``gather``)."""

    rank: int = 0
    world: int = 1
    all_max: Callable[[Sequence[int]], list[int]] = field(default=_same, repr=False)
    barrier: Callable[[], None] = field(default=_nothing, repr=False)
    gather: Callable[[Any], list[Any]] = field(default=_alone, repr=False)

    @property
    def main(self) -> bool:
        """Rank 0: the one that writes the checkpoint and the counter."""
        return self.rank == 0


SINGLE = Ranks()
"""One process: every collective is the identity."""


def agree(ranks: Ranks, save: bool, exit_code: int | None) -> tuple[bool, int | None]:
    """The decision all ranks take at this step boundary: save if any rank
    wants to, exit if any rank must, with the highest exit code wanted (99,
    a stop signal or deadline, over 75, a termination warning)."""
    if ranks.world == 1:
        return save, exit_code
    wanted_save, code = ranks.all_max([int(save), exit_code or 0])
    return bool(wanted_save) or bool(code), code or None


def note_end(rank: int, step: int, saved: bool, environ: Mapping[str, str] | None = None) -> None:
    """Note for the runner the step this rank ends at and whether the
    checkpoint of that step was committed (under ``--launcher``, where
    ``$CHAIN_RANKS_DIR`` is set; nothing otherwise). The runner names ranks
    that stopped at different steps, or without their checkpoint. Never
    raises: the run's outcome must not hang on a note."""
    folder = (os.environ if environ is None else environ).get("CHAIN_RANKS_DIR")
    if not folder:
        return
    try:
        text = json.dumps({"step": step, "saved": saved})
        write_text_atomic(Path(folder) / RANK_PROGRESS.format(rank=rank), text, durable=False)
    except OSError as exc:
        log.warning("could not note rank %d's end for chain: %s", rank, exc)
