"""PyTorch adapter: save and resume a training state exactly, the chain's way.

Needs ``torch`` (``pip install 'slurm-chain[torch]'``); nothing else in
``chain`` imports this module.

What a checkpoint holds (the user guide's list): the model, the optimizer,
the LR scheduler, the grad scaler, any other object with ``state_dict`` /
``load_state_dict``, the RNG states of Python, NumPy, torch and CUDA (when
present), and the progress: optimizer steps, epoch, and the data position
(batches done in the epoch).  It is written through :class:`CheckpointStore`
as a sharded directory holding ``state.pt`` with a ``DONE`` manifest (atomic,
checksummed, the last two plus the best by a metric kept, resume falling back
past a corrupt newest), and the progress counter ``CKPT_PATH`` is written
only once that directory is complete and durable.

Typical use (``examples/python/torch/train.py`` is the full version)::

    env = AppEnv.from_environ(max_iter=300)
    sampler = ResumableSampler(len(dataset), seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    ckpt = TorchCheckpoint("checkpoints", model=model, optimizer=opt,
                           scheduler=sched, sampler=sampler, counter_path=env.ckpt_path)
    loop = TrainLoop(ckpt, env=env)
    for x, y in loop.batches(loader):   # resumes, saves, stops on the signal
        train_step(x, y)                # one optimizer step per batch
    sys.exit(loop.exit_code)            # 0 done, 99 stop signal/deadline, 75 warning

Loading uses ``torch.load(weights_only=True)`` and ``map_location="cpu"`` by
default: nothing is unpickled, and ``load_state_dict`` moves the tensors to
wherever the model and optimizer live, so a checkpoint written on a GPU
resumes on a CPU and the other way round.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from chain.app.ckptinfo import keep_from_env
from chain.app.contract import AppEnv
from chain.app.interval import CheckpointPolicy
from chain.app.ranks import SINGLE, Ranks, agree, note_end
from chain.app.stepgate import StepGate
from chain.app.stop import StopMonitor
from chain.app.store import CheckpointInfo, CheckpointStore, MetricMode
from chain.app.torch_dist import rank_order_mean, torch_ranks
from chain.app.torch_rng import ResumableSampler, rng_state, set_rng_state

__all__ = [
    "STATE_FILE",
    "Progress",
    "Ranks",
    "ResumableSampler",
    "Resumed",
    "StepGate",
    "TorchCheckpoint",
    "TrainLoop",
    "rank_order_mean",
    "rng_state",
    "set_rng_state",
    "torch_ranks",
]

log = logging.getLogger("chain.app.torch")

STATE_FILE = "state.pt"
"""The one shard of a torch checkpoint directory."""

_FORMAT = 1
T = TypeVar("T")


class Stateful(Protocol):
    """Anything with ``state_dict()`` and ``load_state_dict(state)``: modules,
    optimizers, schedulers, grad scalers, samplers."""

    def state_dict(self) -> Any:
        """The object's state."""
        ...

    def load_state_dict(self, state_dict: Any, /) -> Any:
        """Restore what :meth:`state_dict` returned."""
        ...


@dataclass
class Progress:
    """How far training is: the counter the chain sees is ``step``."""

    step: int = 0
    """Optimizer steps done."""
    epoch: int = 0
    """The epoch in progress (0-based)."""
    batch: int = 0
    """Batches done in that epoch: the data position."""


@dataclass(frozen=True)
class Resumed:
    """What :meth:`TorchCheckpoint.restore` loaded."""

    progress: Progress
    info: CheckpointInfo
    rng: Mapping[str, Any]
    skipped: tuple[str, ...] = ()


@dataclass
class TorchCheckpoint:
    """Saves and restores a training state through a :class:`CheckpointStore`.

    ``model`` and the optional ``optimizer``, ``scheduler``, ``scaler`` and
    ``extra`` objects are saved with their ``state_dict``.  ``sampler`` (a
    :class:`ResumableSampler`) is for :class:`TrainLoop`, which positions it
    from the restored progress; a hand-written loop does it with
    ``sampler.resume_at(progress.epoch, progress.batch * batch_size)``.
    ``counter_path`` is the chain's progress counter (default ``$CKPT_PATH``
    when set): it holds the step of the newest complete checkpoint.
    ``keep_last``: how many of the newest are kept, older ones pruned
    (default ``$CHAIN_KEEP_CHECKPOINTS``, the chain's ``--keep-checkpoints``, else 2).  ``meta`` (JSON: the run's
    configuration) goes into every checkpoint's manifest.  ``weights_only``
    and ``map_location`` are passed to ``torch.load``.

    Distributed (``ranks``, default :func:`torch_ranks`): rank 0 writes the
    checkpoint and the counter, holding every rank's RNG state, while the
    others wait at a barrier; on restore rank 0 cleans up and picks the
    checkpoint first, then every rank loads it and takes its own RNG state.
    The objects' states are rank 0's: replicated ones (DDP) only.
    """

    root: str | os.PathLike[str]
    model: Stateful
    optimizer: Stateful | None = None
    scheduler: Stateful | None = None
    scaler: Stateful | None = None
    sampler: ResumableSampler | None = None
    extra: Mapping[str, Stateful] = field(default_factory=dict)
    counter_path: str | os.PathLike[str] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    keep_last: int | None = None
    keep_best: bool = True
    metric_mode: MetricMode = MetricMode.MIN
    map_location: str | torch.device | None = "cpu"
    weights_only: bool = True
    ranks: Ranks | None = None
    store: CheckpointStore = field(init=False)

    def __post_init__(self) -> None:
        if self.ranks is None:
            self.ranks = torch_ranks()
        if self.counter_path is None:
            # Under a chain CKPT_PATH is always set: a forgotten counter_path
            # must not leave the submitter seeing no progress.
            self.counter_path = os.environ.get("CKPT_PATH") or None
        if self.keep_last is None:
            self.keep_last = keep_from_env()  # --keep-checkpoints, given by the runner
        self.store = CheckpointStore(
            self.root,
            keep_last=self.keep_last,
            keep_best=self.keep_best,
            metric_mode=self.metric_mode,
            counter_path=self.counter_path,
        )

    def objects(self) -> dict[str, Stateful]:
        """The saved objects by name."""
        named: dict[str, Stateful | None] = {
            "model": self.model,
            "optimizer": self.optimizer,
            "scheduler": self.scheduler,
            "scaler": self.scaler,
        }
        named.update({f"extra.{k}": v for k, v in self.extra.items()})
        return {k: v for k, v in named.items() if v is not None}

    def state_dict(self, progress: Progress) -> dict[str, Any]:
        """Everything a checkpoint holds, as one dict for ``torch.save``."""
        return {
            "format": _FORMAT,
            "progress": asdict(progress),
            "rng": rng_state(),
            "objects": {name: obj.state_dict() for name, obj in self.objects().items()},
        }

    @property
    def group(self) -> Ranks:
        """The ranks this checkpoint is saved and restored by (one: :data:`SINGLE`)."""
        return self.ranks or SINGLE

    def save(self, progress: Progress, *, metric: float | None = None) -> CheckpointInfo:
        """Write a checkpoint for ``progress.step``; the counter follows it.
        Distributed: every rank calls it at the same step; rank 0 writes."""
        ranks = self.group
        rank_rng = ranks.gather(rng_state()) if ranks.world > 1 else None
        info: CheckpointInfo | None = None
        if ranks.main:
            state = self.state_dict(progress)
            if rank_rng is not None:
                state["rank_rng"] = rank_rng

            def write(scratch: Path) -> None:
                torch.save(state, scratch / STATE_FILE)

            meta = {"progress": asdict(progress), "config": dict(self.meta)}
            info = self.store.save_dir(progress.step, write, metric=metric, meta=meta)
        ranks.barrier()  # nobody goes on, or exits, before the checkpoint is durable
        info = info or self.store.latest()
        if info is None or info.step != progress.step:
            raise RuntimeError(f"rank {ranks.rank}: rank 0 wrote no checkpoint of step {progress.step}")
        return info

    def _load(self, directory: Path) -> dict[str, Any]:
        # Called by the store after the shard checksums matched.
        state = torch.load(directory / STATE_FILE, map_location=self.map_location, weights_only=self.weights_only)
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise ValueError(f"{directory.name}: not a chain.app.torch checkpoint")
        missing = set(self.objects()) - set(state["objects"])
        if missing:
            raise ValueError(f"{directory.name}: no state for {sorted(missing)}")
        return state

    def restore(self, *, apply_rng: bool = True) -> Resumed | None:
        """Load the newest loadable checkpoint into the objects (falling back
        past corrupt ones, which are quarantined) and return its progress;
        ``None`` for a fresh start.  Leftovers of an interrupted save are
        removed first.  With ``apply_rng=False`` the RNG states are only
        returned, for the caller to apply later (see :class:`TrainLoop`)."""
        ranks = self.group
        if not ranks.main:
            ranks.barrier()  # rank 0 cleans up, quarantines and syncs the counter first
        try:
            if ranks.main:
                self.store.cleanup_temporaries()
            restored = self.store.restore(loader=self._load, sync_counter=ranks.main)
        finally:
            if ranks.main:
                ranks.barrier()
        if restored is None:
            if self.store.checkpoints():
                # Checksums matched but torch.load or the format check failed:
                # starting again from step 0 would silently discard the run.
                raise RuntimeError(f"{self.store.root}: checkpoints exist but none loads")
            return None
        state = restored.state
        # A shape or key mismatch here is a changed model, not a damaged file:
        # an older checkpoint would not fit either, so it is raised, not skipped.
        for name, obj in self.objects().items():
            obj.load_state_dict(state["objects"][name])
        progress = Progress(**state["progress"])
        rng = self._own_rng(state)
        if apply_rng:
            set_rng_state(rng)
        return Resumed(progress, restored.info, rng, restored.skipped)

    def _own_rng(self, state: Mapping[str, Any]) -> Any:
        """This rank's RNG state from a checkpoint (rank 0's when the
        checkpoint was written by another number of ranks, or by one)."""
        ranks, rank_rng = self.group, state.get("rank_rng")
        if ranks.world == 1:
            return state["rng"]
        if isinstance(rank_rng, list) and len(rank_rng) == ranks.world:
            return rank_rng[ranks.rank]
        log.warning(
            "checkpoint written by %s rank(s), resumed by %d: every rank takes rank 0's RNG state",
            len(rank_rng) if isinstance(rank_rng, list) else 1,
            ranks.world,
        )
        return state["rng"]


# -------------------------------------------------------------- train loop


class TrainLoop:
    """Runs a step loop under the chain: one optimizer step per batch.

    :meth:`batches` restores the newest checkpoint, yields the remaining
    batches epoch after epoch up to ``max_steps`` (default ``MAX_ITER``), and
    between two batches saves every ``every_steps`` (default
    ``CHECKPOINT_EVERY``) and/or ``every_seconds``, on a new termination
    warning, and on a stop, after which it ends with :attr:`exit_code` 99
    (stop signal, deadline) or 75 (termination warning); after the last step
    it saves and sets 0.  ``metric`` (a callable) scores each checkpoint for
    best-keeping.  The stop signal handlers are installed for the duration.
    """

    def __init__(
        self,
        checkpoint: TorchCheckpoint,
        *,
        env: AppEnv | None = None,
        max_steps: int | None = None,
        every_steps: int | None = None,
        every_seconds: float | None = None,
        metric: Callable[[], float] | None = None,
        monitor: StopMonitor | None = None,
        margin_seconds: float = 5.0,
    ) -> None:
        if max_steps is None or every_steps is None:
            env = env or AppEnv.from_environ()
            max_steps = env.max_iter if max_steps is None else max_steps
            every_steps = env.checkpoint_every if every_steps is None else every_steps
        self.checkpoint = checkpoint
        self.max_steps = max_steps
        policy = CheckpointPolicy(every_steps=every_steps, every_seconds=every_seconds)
        self.gate = StepGate(monitor or StopMonitor(), policy, margin_seconds=margin_seconds)
        self.metric = metric
        self.progress = Progress()
        self.resumed: Resumed | None = None
        self.exit_code: int | None = None
        self._committed = 0  # step 0 is the fresh start: nothing to save
        self._pending_rng: Mapping[str, Any] | None = None
        self._restored = False

    def save(self) -> CheckpointInfo | None:
        """Save the current progress unless it is already saved."""
        if self.progress.step == self._committed:
            return None
        metric = self.metric() if self.metric is not None else None
        with self.gate.measure():
            info = self.checkpoint.save(self.progress, metric=metric)
        self._committed = self.progress.step
        return info

    def restore(self) -> Resumed | None:
        """Install the stop signal handlers and restore the newest checkpoint
        (:meth:`batches` does it when not done yet).  Call it first to know
        the restored :attr:`progress` before training starts."""
        if self._restored:
            return self.resumed
        self.gate.monitor.install()  # a stop during a long load is not a kill
        self.resumed = self.checkpoint.restore(apply_rng=False)
        self._restored = True
        if self.resumed is not None:
            self.progress = self.resumed.progress
            self._committed = self.progress.step
            self._pending_rng = self.resumed.rng  # applied once the iterator exists
        return self.resumed

    def _boundary(self) -> bool:
        """Save if due; True when the loop must end here."""
        # every rank takes the same decision at the same step (chain.app.ranks)
        save, code = agree(self.checkpoint.group, *self.gate.check(self.progress.step))
        if save:
            self.save()
        if code is not None:
            log.info("stopping at step %d with exit code %d", self.progress.step, code)
            self._end(code)
            return True
        return False

    def _end(self, code: int) -> None:
        self.exit_code = code
        note_end(self.checkpoint.group.rank, self.progress.step, saved=self._committed == self.progress.step)

    def _epoch(self, loader: Iterable[T]) -> Iterator[T]:
        sampler, position = self.checkpoint.sampler, self.progress.batch
        batch_size = getattr(loader, "batch_size", None)
        if sampler is not None:
            sampler.set_epoch(self.progress.epoch)
            if position and isinstance(batch_size, int):
                sampler.resume_at(self.progress.epoch, position * batch_size)
                position = 0
        it = iter(loader)
        if self._pending_rng is not None:
            # After iter(): a DataLoader draws its base seed from the global
            # torch RNG there, which the uninterrupted run did at epoch start.
            set_rng_state(self._pending_rng)
            self._pending_rng = None
        for _ in range(position):  # no positionable sampler: skip by reading
            next(it, None)
        return it

    def batches(self, loader: Iterable[T]) -> Iterator[T]:
        """Yield the batches still to train on, saving and stopping between
        them (see the class docstring).  Check :attr:`exit_code` after."""
        with self.gate.monitor:
            self.restore()
            if self._boundary():
                return
            while self.progress.step < self.max_steps:
                before = self.progress.step
                for batch in self._epoch(loader):
                    yield batch
                    self.progress.step += 1
                    self.progress.batch += 1
                    if self.progress.step >= self.max_steps or self._boundary():
                        break
                else:
                    if self.progress.step == before and self.progress.batch == 0:
                        raise ValueError("the loader yielded no batch for a whole epoch")
                    self.progress.epoch += 1
                    self.progress.batch = 0
                    continue
                break
            if self.exit_code is None:
                self.save()
                self._end(0)
