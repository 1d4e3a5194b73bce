"""Lightning adapter: a ``lightning.Trainer`` callback that makes a fit a chain app.

Needs ``lightning`` (``pip install 'slurm-chain[lightning]'``); nothing else
in ``chain`` imports this module.  Use::

    env = AppEnv.from_environ(max_iter=300)
    chain_cb = ChainCallback("checkpoints", sampler=sampler)   # unit="steps"
    trainer = lightning.Trainer(max_steps=env.max_iter, callbacks=[chain_cb], ...)
    trainer.fit(model, loader, ckpt_path=chain_cb.resume_path())

What it does:

* **resume**: :meth:`ChainCallback.resume_path` names the newest complete
  checkpoint whose checksums match (falling back past a corrupt newest, which
  is quarantined) for ``trainer.fit(ckpt_path=...)``; the callback's own
  state in it restores the RNGs of Python, NumPy, torch and CUDA (at the first
  training batch, after Lightning has built its data iterator) and positions
  a :class:`~chain.app.torch.ResumableSampler` mid-epoch.  A fit given no
  ``ckpt_path`` (the callback given by LightningCLI's config) resumes the
  same way by itself.  A train loader that a mid-epoch resume would restart
  (any other sampler) is warned about once, on stderr and in the chain's log;
* **saves** every ``every`` steps or epochs (default ``CHECKPOINT_EVERY``)
  and/or ``every_seconds``, on a new termination warning, and at the end;
  each one a directory holding ``lightning.ckpt`` (``trainer.save_checkpoint``)
  published with a ``DONE`` manifest by :class:`CheckpointStore` (the last
  two plus the best by ``monitor`` kept); the progress counter ``CKPT_PATH``
  (global steps, or completed epochs with ``unit="epochs"``) is written only
  after the directory is complete and durable;
* **stops** on the stop signal, ``CHAIN_DEADLINE`` or a termination warning:
  it saves at the step boundary and raises ``SystemExit`` with the contract's
  code (99, or 75 for a warning), which ``trainer.fit`` passes on after
  Lightning's own cleanup.  SIGUSR1 (Slurm's ``--signal=USR1@...`` habit of
  Lightning users) counts as a stop signal too;
* **turns Lightning's SLURM auto-requeue off**: Lightning would otherwise
  catch SIGUSR1, save an ``hpc_ckpt`` and run ``scontrol requeue`` on the
  job, resubmitting it behind the chain's back; and it takes SIGTERM over
  from Lightning once training starts, so a stop is always a save and a
  chain exit code, never Lightning's exit 0.

Limits: one optimizer step per batch for exact data positioning; strategies
whose checkpoint is one file written by rank 0 (single device, DDP).  In a
``max_steps`` fit, Lightning resumes a checkpoint taken at an epoch's last
batch without running that epoch's ``on_train_epoch_end`` hooks again (its
LR scheduler steps and data do continue exactly); ``unit="epochs"`` saves at
the epoch's end instead, from which an epoch-based fit resumes with every hook.
Exactness of the global torch RNG across a resume needs ``generator=`` on
DataLoaders other than the training one (each ``iter()`` of a DataLoader
without one draws from the global RNG).
"""

from __future__ import annotations

import logging
import os
import signal
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import lightning.pytorch as pl
from lightning.fabric.utilities.rank_zero import rank_zero_only
from lightning.pytorch.callbacks import Checkpoint

from chain.app.atomic import CounterFormatError, read_counter, write_counter
from chain.app.contract import AppEnv, ExitCode
from chain.app.interval import CheckpointPolicy
from chain.app.lightning_resume import disable_slurm_requeue, resume_gap, warn_resume_gap
from chain.app.ranks import note_end
from chain.app.stepgate import StepGate
from chain.app.stop import StopMonitor
from chain.app.store import CheckpointInfo, CheckpointStore, MetricMode
from chain.app.torch_dist import torch_ranks
from chain.app.torch_rng import ResumableSampler, rng_state, set_rng_state

__all__ = ["CKPT_FILE", "ChainCallback", "ResumableSampler", "disable_slurm_requeue", "resume_gap"]

log = logging.getLogger("chain.app.lightning")

CKPT_FILE = "lightning.ckpt"
"""The one shard of a Lightning checkpoint directory."""


class ChainCallback(Checkpoint):
    """Resume, periodic and final saves, stop handling and the progress
    counter for a ``lightning.Trainer`` run as a chain app (see the module
    docstring).

    ``dirpath``: the checkpoint store.  ``unit``: what the counter counts,
    ``"steps"`` (``trainer.global_step``; pair with ``max_steps=MAX_ITER``) or
    ``"epochs"`` (completed epochs; pair with ``max_epochs=MAX_ITER``).
    ``every``: periodic save interval in that unit (default
    ``CHECKPOINT_EVERY``; 0 disables).  ``monitor``/``mode``: the logged
    metric that picks the best checkpoint kept besides the last
    ``keep_last``.  ``sampler``: the training :class:`ResumableSampler`, to
    resume mid-epoch at the exact sample.  Being a ``Checkpoint``, it runs
    after the other callbacks of each hook, and ``Trainer`` adds no default
    ``ModelCheckpoint`` beside it.
    """

    def __init__(
        self,
        dirpath: str | os.PathLike[str] = "checkpoints",
        *,
        unit: Literal["steps", "epochs"] = "steps",
        every: int | None = None,
        every_seconds: float | None = None,
        monitor: str | None = None,
        mode: Literal["min", "max"] = "min",
        keep_last: int = 2,
        sampler: ResumableSampler | None = None,
        env: AppEnv | None = None,
        stop_monitor: StopMonitor | None = None,
        margin_seconds: float = 5.0,
    ) -> None:
        if unit not in ("steps", "epochs"):
            raise ValueError(f"unit must be 'steps' or 'epochs', not {unit!r}")
        env = env or AppEnv.from_environ(max_iter=0)
        self.unit = unit
        self.monitor = monitor
        self.sampler = sampler
        self.counter_path = env.ckpt_path
        self.store = CheckpointStore(dirpath, keep_last=keep_last, metric_mode=MetricMode(mode), counter_path=None)
        every = env.checkpoint_every if every is None else every
        policy = CheckpointPolicy(every_steps=every, every_seconds=every_seconds)
        self.gate = StepGate(stop_monitor or StopMonitor(), policy, margin_seconds=margin_seconds)
        self._signals = tuple(dict.fromkeys([*self.gate.monitor.signals, signal.SIGUSR1]))
        self._saved_handlers: dict[signal.Signals, Any] = {}
        self._resume_asked = False
        self._resumed_unasked = ""  # the checkpoint a fit given no ckpt_path resumed from
        self._warned_resume_gap = False
        self._pending_rng: Mapping[str, Any] | None = None
        self._committed: tuple[int, int] | None = None  # (global step, counter)
        self._position = (0, 0, False)  # (epoch, samples done, at its end) for the next save
        self._at_epoch_end: tuple[bool, int | None] = (False, None)  # deferred (save, exit)
        self.exit_code: int | None = None
        self.resumed: CheckpointInfo | None = None
        """The checkpoint :meth:`resume_path` chose."""
        self.last_saved: CheckpointInfo | None = None

    # ----------------------------------------------------------------- resume

    def resume_path(self) -> str | None:
        """The newest complete, verified checkpoint for ``fit(ckpt_path=...)``,
        or None for a fresh start; the progress counter is set to match it."""
        self._resume_asked = True
        rank_zero = getattr(rank_zero_only, "rank", 0) == 0  # set by Lightning from the env
        if rank_zero:
            self.store.cleanup_temporaries()  # no save of ours can be running yet
        restored = self.store.restore(loader=lambda d: d / CKPT_FILE, sync_counter=False)
        counter = int(restored.info.meta.get("counter", 0)) if restored else 0
        if rank_zero:
            self._sync_counter(counter)
        if restored is None:
            return None
        self.resumed = restored.info
        self._committed = (restored.info.step, counter)
        return str(restored.state)

    def _sync_counter(self, value: int) -> None:
        try:
            current = read_counter(self.counter_path)
        except CounterFormatError as exc:
            log.warning("progress counter unreadable (%s); rewriting it", exc)
            current = -1
        if current != value and not (current is None and value == 0):
            log.warning("progress counter %s -> %d to match the restored checkpoint", current, value)
            write_counter(self.counter_path, value)

    def state_dict(self) -> dict[str, Any]:
        """Saved inside every Lightning checkpoint: RNG states, data position.
        Under DDP every rank's RNG states (``rng_by_rank``): rank 0 writes the
        file, and each rank's dropout and noise must go on from its own."""
        epoch, start, epoch_end = self._position
        state = {"rng": rng_state(), "epoch": epoch, "start": start, "epoch_end": epoch_end}
        ranks = torch_ranks()  # every rank dumps the checkpoint (a collective): the gather is safe
        if ranks.world > 1:
            state["rng_by_rank"] = ranks.gather(state["rng"])
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Called by Lightning while restoring, before the data loaders exist."""
        if self.sampler is not None:
            self.sampler.resume_at(int(state_dict["epoch"]), int(state_dict["start"]))
        # When to put the RNG states back: a DataLoader without generator= draws
        # a seed from the global torch RNG at each iter(), and the resumed fit
        # calls iter() once before training.  Mid-epoch the uninterrupted run had
        # no such draw after the save: restore after it (first batch).  At an
        # epoch's end it had one, for the next epoch: restore before it (now).
        rng = state_dict["rng"]
        by_rank = state_dict.get("rng_by_rank")
        rank = torch_ranks().rank
        if isinstance(by_rank, list) and rank < len(by_rank):
            rng = by_rank[rank]  # (more ranks than saved: rank 0's, as before)
        if state_dict.get("epoch_end"):
            set_rng_state(rng)
        else:
            self._pending_rng = rng

    # ---------------------------------------------------------------- signals

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.gate.monitor.request_stop(signum)  # only a flag: save at the step boundary

    def _take_signals(self) -> None:
        for sig in self._signals:
            previous = signal.signal(sig, self._on_signal)
            self._saved_handlers.setdefault(sig, previous)

    def _release_signals(self) -> None:
        for sig, previous in self._saved_handlers.items():
            signal.signal(sig, previous)
        self._saved_handlers.clear()

    # ------------------------------------------------------------------ hooks

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Resume when the fit was not told to; turn Lightning's requeue off
        (before fit registers its handlers)."""
        if stage != "fit":
            return
        if not self._resume_asked:
            self._resume_unasked(trainer)
        disable_slurm_requeue(trainer)
        if self.sampler is not None:
            # Lightning warns that a mid-epoch resume repeats data unless the
            # loader is stateful; the sampler's position makes it exact here.
            warnings.filterwarnings("ignore", message=".*your dataloader is not resumable.*")

    def _resume_unasked(self, trainer: pl.Trainer) -> None:
        """A fit given no ``ckpt_path=resume_path()`` (LightningCLI, whose
        ``ckpt_path`` a config cannot compute) resumes all the same.  Lightning
        picks its checkpoint before any hook: ours goes into its checkpoint
        connector now, where the restore right after ``setup`` reads it (with
        no path of its own given, that restore loads nothing over it)."""
        path = self.resume_path()
        if path is None:
            return
        if getattr(trainer.strategy, "restore_checkpoint_after_setup", False):
            # FSDP, DeepSpeed, ModelParallel restore after the strategy's own setup,
            # which a checkpoint loaded here would precede: the fit must ask
            raise RuntimeError(
                f"{self.store.root} holds checkpoints but the fit does not resume, and with "
                f"{type(trainer.strategy).__name__} the callback cannot resume it by itself: call "
                "trainer.fit(..., ckpt_path=callback.resume_path())"
            )
        log.info("resuming from %s (the fit was given no ckpt_path)", path)
        trainer._checkpoint_connector.resume_start(path)
        self._resumed_unasked = str(path)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Refuse a ``ckpt_path`` of the user's that replaced ours unasked."""
        if self._resumed_unasked and trainer.ckpt_path is not None and str(trainer.ckpt_path) != self._resumed_unasked:
            raise RuntimeError(
                f"fit(ckpt_path={str(trainer.ckpt_path)!r}) replaced the newest checkpoint of "
                f"{self.store.root}: give ckpt_path=callback.resume_path(), or none"
            )

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Take the stop signals over from Lightning, whose SIGTERM handler
        would end the fit with exit 0 and no save.  Only now, after fit
        registered its handlers: installed earlier, ours would be what
        Lightning restores when the fit ends, leaving them behind.  Warn
        about a train loader a mid-epoch resume cannot continue: the loaders
        exist from now on, and a stop saves mid-epoch in either unit."""
        if trainer.received_sigterm:  # arrived between Lightning's registration and now
            self.gate.monitor.request_stop(signal.SIGTERM)
        self._take_signals()
        combined = getattr(trainer.fit_loop, "_combined_loader", None)
        loaders = getattr(combined, "flattened", None) or [trainer.train_dataloader]
        gaps = [gap for loader in loaders if (gap := resume_gap(loader, self.sampler))]
        if gaps and trainer.is_global_zero and not self._warned_resume_gap:
            self._warned_resume_gap = True  # once per fit: a fit's loaders do not change
            warn_resume_gap("; ".join(dict.fromkeys(gaps)))

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        """Apply the restored RNG states, once, now that the iterator exists."""
        if self._pending_rng is not None:
            set_rng_state(self._pending_rng)
            self._pending_rng = None

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        """Save and maybe stop at this step boundary."""
        step = trainer.global_step
        save, code = self._decide(trainer, step if self.unit == "steps" else None)
        save = save or (self.unit == "steps" and 0 < trainer.max_steps <= step)
        last = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        if self.unit == "epochs" and last:
            # The epoch's end comes next, with no step in between: an epoch-based
            # fit resumes from there as Lightning intends (from its last batch,
            # Lightning would skip the epoch-end hooks the uninterrupted run ran).
            self._at_epoch_end = (save, code)
            return
        if save:
            samples = (batch_idx + 1) * int(getattr(trainer.train_dataloader, "batch_size", None) or 1)
            counter = step if self.unit == "steps" else trainer.current_epoch
            self._save(trainer, counter, (trainer.current_epoch, samples, last))
        self._exit(trainer, code, step if self.unit == "steps" else trainer.current_epoch)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Epoch unit: saves due at the epoch's last batch, and the periodic and
        final ones.  (A step-based fit saves at batch ends only: Lightning does
        not resume a max_steps fit correctly from an epoch-end checkpoint.)"""
        if self.unit != "epochs":
            return
        save, code = self._at_epoch_end
        self._at_epoch_end = (False, None)
        epochs = trainer.current_epoch + 1  # this one is complete once its hooks ran
        save_now, code_now = self._decide(trainer, epochs)
        code = code if code is not None else code_now
        if save or save_now or code is not None or epochs >= (trainer.max_epochs or 0) > 0:
            self._save(trainer, epochs, (epochs, 0, True))
        self._exit(trainer, code, epochs)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The last save, if the loop ended anywhere else; give the signals back."""
        counter = trainer.global_step if self.unit == "steps" else trainer.current_epoch
        if self._committed is None or self._committed[1] != counter:
            self._save(trainer, counter, (trainer.current_epoch, 0, True))
        self.exit_code = int(ExitCode.DONE)
        self._note_end(trainer, counter)
        self._release_signals()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        """Give the signal handlers back (our exit included)."""
        self._release_signals()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Give the signal handlers back, if not done yet."""
        self._release_signals()

    # ---------------------------------------------------------------- helpers

    def _decide(self, trainer: pl.Trainer, count: int | None) -> tuple[bool, int | None]:
        save, code = self.gate.check(count)
        if trainer.world_size > 1:
            # Every rank must enter the same save (it is a collective) and stop together.
            strategy = trainer.strategy
            save = strategy.reduce_boolean_decision(save, all=False)
            stop = strategy.reduce_boolean_decision(code is not None, all=False)
            hard = strategy.reduce_boolean_decision(code == ExitCode.STOPPED, all=False)
            code = (int(ExitCode.STOPPED) if hard else int(ExitCode.TEMPFAIL)) if stop else None
        return save, code

    def _exit(self, trainer: pl.Trainer, code: int | None, counter: int) -> None:
        if code is None:
            return
        self.exit_code = code
        log.info("stopping with exit code %d", code)
        self._note_end(trainer, counter)
        # An exception, not trainer.should_stop: Lightning would still run the
        # epoch-end hooks and scheduler steps after our save and diverge from it.
        raise SystemExit(code)

    def _note_end(self, trainer: pl.Trainer, counter: int) -> None:
        """The runner's note of this rank's end (``chain.app.ranks.note_end``)."""
        note_end(trainer.global_rank, counter, saved=self._committed is not None and self._committed[1] == counter)

    def _metric(self, trainer: pl.Trainer) -> float | None:
        if self.monitor is None:
            return None
        value = trainer.callback_metrics.get(self.monitor)
        return None if value is None else float(value)

    def _save(self, trainer: pl.Trainer, counter: int, position: tuple[int, int, bool]) -> None:
        step = trainer.global_step
        if self._committed == (step, counter):
            return
        self._position = position
        meta = {"counter": counter, "unit": self.unit, "epoch": trainer.current_epoch}
        with self.gate.measure():
            if trainer.is_global_zero:

                def write(scratch: Path) -> None:
                    trainer.save_checkpoint(scratch / CKPT_FILE, weights_only=False)

                metric = self._metric(trainer)
                self.last_saved = self.store.save_dir(step, write, metric=metric, meta=meta)
                # The directory is complete and durable: only now may the counter move.
                write_counter(self.counter_path, counter)
            else:
                trainer.save_checkpoint(self.store.root / CKPT_FILE, weights_only=False)  # collective
        self._committed = (step, counter)
