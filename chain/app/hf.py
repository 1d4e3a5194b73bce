"""Hugging Face ``Trainer`` adapter: a ``TrainerCallback`` that makes a
``trainer.train()`` a chain app.

Needs ``transformers`` (``pip install 'slurm-chain[hf]'``); nothing else in
``chain`` imports this module.  In a training script (the complete one, with
its six changes numbered, is the docs' Hugging Face recipe)::

    cb = ChainTrainerCallback()                                         # before anything slow
    args = TrainingArguments(..., max_steps=int(os.environ["MAX_ITER"]))
    trainer = Trainer(model, args, train_dataset=..., callbacks=[cb])
    trainer.train(resume_from_checkpoint=cb.resume_path())
    sys.exit(cb.exit_code)

What it does:

* **resume**: :meth:`ChainTrainerCallback.resume_path` names the Trainer's
  ``checkpoint-N`` directory that the progress counter ``CKPT_PATH`` points
  to (the Trainer restores model, optimizer, scheduler, RNG states and the
  data position from it); directories of steps beyond the counter are
  saves a killed runner left unfinished and are moved to
  ``chain-incomplete/`` first, so the Trainer's rotation never keeps one in
  place of a good one; with no counter nothing is touched;
* **saves** every ``every`` steps (default ``CHECKPOINT_EVERY``), at the step
  boundary after the stop signal, ``CHAIN_DEADLINE`` or a termination
  warning, and at the last step; ``CKPT_PATH`` (the Trainer's
  ``global_step``) is written only in ``on_save``, after the Trainer has
  written the whole checkpoint;
* **complete, then counted**: in ``on_save`` each file of the new
  ``checkpoint-N`` is fsync'ed and a ``DONE`` marker listing their sizes is
  written, then the counter (``chain.app.ckptinfo.mark_complete``): chain's
  ``glob:`` reader and its check at a runner's start can tell it complete;
* **retention**: ``$CHAIN_KEEP_CHECKPOINTS`` (``--keep-checkpoints``, default
  2) when ``save_total_limit`` is unset, one more when ``metric_for_best_model``
  is set (the Trainer's best one is kept besides); never fewer than 2 (3).
* **stops**: the training ends at the step boundary after the save, and
  :attr:`ChainTrainerCallback.exit_code` is the contract's code: 0 once
  ``MAX_ITER`` steps are done, 99 after a stop, 75 after a termination warning.

The stop signal's handler is installed when the callback is made, so a
signal that arrives while the model loads still leads to a save at the first
step boundary.  ``args.max_steps`` must be ``MAX_ITER`` (a warning says so).

Several processes (``torchrun``, ``accelerate launch``, ``--launcher``): at
every step boundary they agree (an all-reduce, ``chain.app.ranks``) whether
to save and whether to stop, so a stop signal or deadline that reaches one
process first stops all of them at the same step; the Trainer saves, process
0 writes the counter and moves directories, and every process resumes from
the same ``checkpoint-N``. With three processes or more, a resumed run is
bit-identical to an uninterrupted one once :func:`rank_order_gradients`
(one line after the Trainer is made) has the Trainer's DDP add the ranks'
gradients in rank order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from chain.app.atomic import read_counter, write_counter
from chain.app.ckptinfo import keep_from_env, mark_complete
from chain.app.contract import AppEnv, ExitCode
from chain.app.interval import CheckpointPolicy
from chain.app.ranks import SINGLE, Ranks, agree, note_end
from chain.app.stepgate import StepGate
from chain.app.stop import StopMonitor
from chain.app.torch_dist import rank_order_mean, torch_ranks

__all__ = ["ChainTrainerCallback", "rank_order_gradients"]

log = logging.getLogger("chain.app.hf")

_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")  # the Trainer's PREFIX_CHECKPOINT_DIR-<step>
INCOMPLETE_DIR = "chain-incomplete"
"""Where :meth:`ChainTrainerCallback.resume_path` sets aside checkpoints saved after the counter."""


class ChainTrainerCallback(TrainerCallback):
    """Resume, save and stop a ``transformers.Trainer`` as a chain runner's app.

    ``env``: the contract's environment (default ``AppEnv.from_environ()``);
    ``every`` / ``every_seconds``: save every N optimizer steps (default
    ``CHECKPOINT_EVERY``; 0: only on a stop and at the end) and/or seconds;
    ``margin_seconds``: added to the measured save and step times when
    deciding how early before ``CHAIN_DEADLINE`` to stop; ``monitor``: the
    :class:`StopMonitor` (tests inject one).
    """

    def __init__(
        self,
        env: AppEnv | None = None,
        *,
        every: int | None = None,
        every_seconds: float | None = None,
        margin_seconds: float = 5.0,
        monitor: StopMonitor | None = None,
    ) -> None:
        self.env = env if env is not None else AppEnv.from_environ()
        policy = CheckpointPolicy(
            every_steps=self.env.checkpoint_every if every is None else every, every_seconds=every_seconds
        )
        # installed now: a stop signal while the model loads still ends in a save
        self.gate = StepGate(
            (monitor if monitor is not None else StopMonitor()).install(), policy, margin_seconds=margin_seconds
        )
        self.global_step = 0
        self.stop_code: int | None = None
        """The contract's code of the stop that ended the training (99 or 75), if one did."""
        self._output_dir: Path | None = None
        self._main_process = True  # the Trainer's process 0 (only it moves directories)
        self._ranks: Ranks = SINGLE  # the Trainer's processes, once its training begins
        self._saved_step: int | None = None  # the step of the last checkpoint written
        self._measuring: contextlib.AbstractContextManager[None] | None = None

    # ------------------------------------------------------------ resume

    def resume_path(self, output_dir: str | None = None) -> str | None:
        """The checkpoint to pass to ``trainer.train(resume_from_checkpoint=...)``:
        ``checkpoint-<counter>`` in the Trainer's ``output_dir``, or None when
        the counter is absent or 0 (a fresh start; nothing in ``output_dir``
        is touched).  ``FileNotFoundError`` when the counter names a checkpoint
        that is gone (starting afresh would silently redo the work)."""
        root = Path(output_dir) if output_dir is not None else self._output_dir
        if root is None:
            raise RuntimeError("resume_path() needs the Trainer made first (or output_dir=)")
        counter = read_counter(self.env.ckpt_path) or 0
        if counter == 0:
            return None
        path = root / f"checkpoint-{counter}"
        if not path.is_dir():
            raise FileNotFoundError(f"the counter {self.env.ckpt_path} says {counter} steps, but {path} is missing")
        if self._main_process:
            self._set_aside_incomplete(root, counter)
        return str(path)

    @staticmethod
    def _set_aside_incomplete(root: Path, counter: int) -> None:
        """Move ``checkpoint-N`` with N above the counter (written after the
        last counted save: a runner killed in a save left it) into
        ``<output_dir>/chain-incomplete/``, where the Trainer's rotation, which
        would keep it as the newest, does not look."""
        aside = root / INCOMPLETE_DIR
        for child in sorted(root.iterdir()):
            match = _CHECKPOINT_DIR.match(child.name)
            if match and int(match.group(1)) > counter and child.is_dir():
                aside.mkdir(exist_ok=True)
                target = aside / f"{child.name}.{int(time.time())}"
                log.warning(
                    "moving %s to %s: saved after the counter (%d), so not a complete save", child, target, counter
                )
                child.rename(target)

    # --------------------------------------------------------- callbacks

    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        self._output_dir = Path(args.output_dir or "trainer_output")  # the Trainer's own default
        self._main_process = args.process_index == 0
        # the counted checkpoint must outlive the next save (rotation runs before on_save writes the
        # counter): two kept, three when the Trainer also keeps its best one
        best = 1 if args.metric_for_best_model else 0
        least = 2 + best
        if args.save_total_limit is None:
            args.save_total_limit = max(keep_from_env(), 2) + best  # --keep-checkpoints
        elif args.save_total_limit < least:
            log.warning("save_total_limit %d raised to %d", args.save_total_limit, least)
            args.save_total_limit = least
        if args.max_steps != self.env.max_iter:
            log.warning(
                "TrainingArguments.max_steps is %s but MAX_ITER is %d: the chain counts steps up to MAX_ITER",
                args.max_steps,
                self.env.max_iter,
            )

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # the Trainer has set up its process group by now (every process calls this)
        self._ranks = torch_ranks()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        self.global_step = state.global_step
        # every process takes the same decision at this step (chain.app.ranks): a stop that reached
        # one alone would leave the others in the next collective until the wall time
        save, code = agree(self._ranks, *self.gate.check(state.global_step))
        if code is not None:
            self.stop_code = code
            control.should_training_stop = True
        if save or state.global_step >= self.env.max_iter:  # a stop always wants its save (StepGate)
            control.should_save = True
        if control.should_save and self._measuring is None:
            # the Trainer saves between this call and on_save: that is the save's cost
            self._measuring = self.gate.measure()
            self._measuring.__enter__()

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        # the Trainer calls this after the whole checkpoint-<step> directory is written
        self.global_step = state.global_step
        if self._measuring is not None:
            self._measuring.__exit__(None, None, None)
            self._measuring = None
        if state.is_world_process_zero:
            mark_complete(Path(args.output_dir or "trainer_output") / f"checkpoint-{state.global_step}")
            write_counter(self.env.ckpt_path, state.global_step)
        self._saved_step = state.global_step

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        note_end(self._ranks.rank, state.global_step, saved=self._saved_step == state.global_step)

    # -------------------------------------------------------------- exit

    @property
    def exit_code(self) -> int:
        """0 when ``MAX_ITER`` steps are done, 75 after a termination
        warning, 99 after any other stop (the contract's codes)."""
        if self.global_step >= self.env.max_iter:
            return int(ExitCode.DONE)
        return self.stop_code if self.stop_code is not None else int(ExitCode.STOPPED)


def rank_order_gradients(trainer: Any) -> None:
    """Have ``trainer``'s DDP average the gradients with
    :func:`chain.app.torch_dist.rank_order_mean` (added in rank order,
    whatever DDP's bucket layout), so a resumed run of three processes or
    more ends bit-identical to an uninterrupted one. Call it once the
    ``Trainer`` is made, before ``train()``: the Trainer's accelerator wraps
    the model in DDP inside ``train()``, and registers the hook its DDP
    settings name (kept here: ``ddp_find_unused_parameters``,
    ``ddp_bucket_cap_mb`` and the rest reach DDP unchanged). It moves
    ``world`` times the gradients: for exact resumes and their checks, not
    for throughput. One process: nothing changes."""
    from accelerate.utils import DistributedDataParallelKwargs

    class RankOrder(DistributedDataParallelKwargs):  # type: ignore[misc]  # accelerate is untyped
        def register_comm_hook(self, model: Any) -> None:
            model.register_comm_hook(None, rank_order_mean)

    accelerator = trainer.accelerator
    old = accelerator.ddp_handler
    settings = {f.name: getattr(old, f.name) for f in dataclasses.fields(old)} if old is not None else {}
    accelerator.ddp_handler = RankOrder(**settings)
