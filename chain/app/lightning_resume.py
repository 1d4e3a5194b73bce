"""What ``ChainCallback`` (``chain.app.lightning``) checks and changes in
Lightning's own machinery: a train dataloader that a mid-epoch resume would
restart (and the loud warning about it), and Lightning's SLURM auto-requeue
(turned off: the chain resubmits)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
from lightning.fabric.plugins.environments.slurm import SLURMEnvironment
from lightning.fabric.utilities.types import _Stateful
from torch.utils.data import IterableDataset

from chain.app.torch_rng import ResumableSampler

__all__ = ["disable_slurm_requeue", "resume_gap", "warn_resume_gap"]

log = logging.getLogger("chain.app.lightning")


def resume_gap(loader: object, sampler: ResumableSampler | None = None) -> str | None:
    """Why a fit resumed mid-epoch would not continue ``loader`` where it
    stopped, or None when it would: Lightning restores a loader with
    ``state_dict``/``load_state_dict`` itself, and the callback positions
    ``sampler`` (its own).  Any other loader restarts the epoch: the resumed
    fit replays the epoch's first batches and never sees its last ones."""
    if isinstance(loader, _Stateful):
        return None
    batches = getattr(loader, "batch_sampler", None)
    used = getattr(batches, "sampler", None)
    used = getattr(loader, "sampler", None) if used is None else used
    if sampler is not None and used is sampler:
        return None
    if isinstance(getattr(loader, "dataset", None), IterableDataset):
        return "its dataset is an IterableDataset, read from its start at every resume"
    if isinstance(used, ResumableSampler):
        return "its ResumableSampler is not the one given to ChainCallback(sampler=...)"
    what = f"its sampler ({type(used).__name__})" if used is not None else type(loader).__name__
    return f"{what} starts every epoch from the beginning"


_RESUME_FIX = (
    "fix: sampler = chain.app.lightning.ResumableSampler(dataset, seed=0)",
    "     DataLoader(dataset, batch_size=..., sampler=sampler)   # instead of shuffle=True",
    "     ChainCallback(..., sampler=sampler)",
    "or a loader Lightning restores by itself (state_dict/load_state_dict: StatefulDataLoader)",
)


def warn_resume_gap(why: str) -> None:
    """Loudly, where a chain's user looks: stderr (the runner's job log,
    ``chain logs``) and the chain's own ``chain.log`` when the runner named it."""
    problem = (
        f"the train dataloader cannot resume mid-epoch: {why}. A chain stops its runners (and "
        "ChainCallback saves) in the middle of epochs, and each such resume replays the epoch's "
        "first batches and skips its last ones"
    )
    lines = [f"WARNING: {problem}", *_RESUME_FIX]
    print("\n".join(f"chain: {line}" for line in lines), file=sys.stderr, flush=True)
    chain_log = Path(os.environ.get("CHAIN_DIR") or "/nonexistent") / "chain.log"
    if chain_log.is_file():  # a chain's, made by the submit: never create one here
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        one_line = "; ".join(" ".join(line.split()) for line in lines)
        try:
            with chain_log.open("a", encoding="utf-8") as fh:
                fh.write(f"[{stamp}] app (pid {os.getpid()}): {one_line}\n")
        except OSError as exc:  # a log line is not worth failing the fit for
            log.warning("cannot write %s: %s", chain_log, exc.strerror)


def disable_slurm_requeue(trainer: pl.Trainer) -> bool:
    """Turn off Lightning's SLURM auto-requeue on ``trainer``; True if it was on.

    Lightning reads ``auto_requeue`` from the trainer's cluster environment
    when ``fit`` registers its signal handlers, after the callbacks' ``setup``:
    this must run before that (``ChainCallback.setup`` does).
    """
    connector = getattr(trainer, "_accelerator_connector", None)
    envs = [
        getattr(trainer.strategy, "cluster_environment", None),
        getattr(connector, "cluster_environment", None),  # what the signal connector reads
    ]
    changed = False
    for env in envs:
        if isinstance(env, SLURMEnvironment) and env.auto_requeue:
            env.auto_requeue = False
            changed = True
    if changed:
        log.info("Lightning's SLURM auto-requeue turned off: the chain resubmits")
    return changed
