"""A small Lightning training, resumed exactly across a chain of jobs.

The same task as ../torch/train.py (an MLP with dropout, AdamW, a step LR
schedule, NumPy input noise, shuffled mini-batches) as a LightningModule.
chain.app.lightning.ChainCallback resumes it from the newest complete
checkpoint, saves periodically and on the stop signal (then exits 99, or 75
on a termination warning), writes the progress counter (optimizer steps)
after each durable save, and keeps Lightning's SLURM auto-requeue off.

Environment (the chain contract plus a few knobs):
  MAX_ITER, CKPT_PATH, CHECKPOINT_EVERY   optimizer steps, progress counter, save every N steps
  STEP_SECONDS      extra sleep per step, so this toy needs several runners (default 0.1)
  TRAIN_CKPT_DIR    checkpoint directory (default checkpoints)
  TRAIN_METRICS     per-step losses, CSV "step,loss" (default metrics.csv)
  TRAIN_RUN_LOG     run log, appended (default train_run.log; rank N > 0: train_runN.log)

Under torchrun (``--launcher torchrun --nproc-per-node 2``), one process a rank:
DDP on the CPUs, each rank on its share of the data (its own
ResumableSampler), with its own dropout and noise; the callback saves once,
with every rank's RNG states, and every rank stops at the same step.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    import chain.app as ca
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import chain.app as ca
from chain.app.lightning import ChainCallback
from chain.app.torch import ResumableSampler

log = logging.getLogger("train")


@dataclass(frozen=True)
class Config:
    """Everything that defines the run; saved as the module's hyperparameters."""

    seed: int = 1234
    samples: int = 512
    features: int = 16
    hidden: int = 32
    batch: int = 32
    lr: float = 0.01
    lr_every: int = 100
    dropout: float = 0.1
    input_noise: float = 0.05


def make_data(cfg: Config) -> TensorDataset:
    """The fixed data set, derived from the seed (so never checkpointed)."""
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.samples, cfg.features, generator=g)
    w = torch.randn(cfg.features, 1, generator=g)
    y = torch.sin(x @ w) + 0.1 * torch.randn(cfg.samples, 1, generator=g)
    return TensorDataset(x, y)


def keep_rows_up_to(path: Path, step: int) -> None:
    """Drop metric rows past the restored step: those steps run again, and
    the file must hold each step once (they exist only after a SIGKILL)."""
    if not path.exists():
        ca.write_text_atomic(path, "step,loss\n")
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in lines[1:] if ln.count(",") == 1 and int(ln.split(",")[0]) <= step]
    if len(kept) != len(lines) - 1:
        ca.write_text_atomic(path, "\n".join(["step,loss", *kept]) + "\n")


class Regressor(L.LightningModule):
    """The MLP; writes one metrics row per optimizer step."""

    def __init__(self, cfg: Config, metrics: TextIO, step_seconds: float) -> None:
        super().__init__()
        self.save_hyperparameters(asdict(cfg))
        self.cfg, self.metrics, self.step_seconds = cfg, metrics, step_seconds
        self.net = nn.Sequential(
            nn.Linear(cfg.features, cfg.hidden),
            nn.Tanh(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, 1),
        )

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        noise = np.random.normal(0, self.cfg.input_noise, tuple(x.shape))
        loss = nn.functional.mse_loss(self.net(x + torch.from_numpy(noise).float().to(x)), y)
        self.log("train_loss", loss)
        # Written before this step's save can happen (the callback saves after it).
        self.metrics.write(f"{self.global_step + 1},{loss.item()!r}\n")
        self.metrics.flush()
        if self.step_seconds:
            time.sleep(self.step_seconds)
        return loss

    def configure_optimizers(self) -> Any:
        opt = torch.optim.AdamW(self.parameters(), lr=self.cfg.lr)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=self.cfg.lr_every, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def main() -> int:
    env = ca.AppEnv.from_environ(max_iter=300, checkpoint_every=50, ckpt_path="train_step.txt")
    step_seconds = float(os.environ.get("STEP_SECONDS", "0.1"))
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's
    local = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    metrics_path = Path(os.environ.get("TRAIN_METRICS", "metrics.csv") if rank == 0 else os.devnull)
    ca.configure_logging(os.environ.get("TRAIN_RUN_LOG", "train_run.log") + (str(rank) if rank else ""))
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    torch.set_num_threads(1)  # a small model: one thread is fastest, and kind to shared nodes

    cfg = Config()
    # initial weights (DDP gives every rank rank 0's), and each rank its own dropout and noise
    # (Lightning seeds again from this at its DDP set-up); checkpoints carry the RNGs on
    L.seed_everything(cfg.seed + rank, verbose=False)
    data = make_data(cfg)
    sampler = ResumableSampler(data, seed=cfg.seed, num_replicas=world, rank=rank)
    # A generator of its own: iter(loader) then leaves the global torch RNG alone.
    loader = DataLoader(data, batch_size=cfg.batch, sampler=sampler, generator=torch.Generator())

    chain_cb = ChainCallback(
        os.environ.get("TRAIN_CKPT_DIR", "checkpoints"),
        sampler=sampler,
        monitor="train_loss",
        env=env,
    )
    resume = chain_cb.resume_path()
    step = chain_cb.resumed.step if chain_cb.resumed else 0
    log.info("start at step %d (job %s)", step, env.job_id or "-")
    if rank == 0:
        keep_rows_up_to(metrics_path, step)
    distributed: dict[str, Any] = (
        {"strategy": "ddp", "devices": local, "num_nodes": world // local, "use_distributed_sampler": False}
        if world > 1
        else {"devices": 1}
    )
    trainer = L.Trainer(
        max_steps=env.max_iter,
        max_epochs=-1,
        callbacks=[chain_cb],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        accelerator="auto",
        **distributed,
    )
    with open(metrics_path, "a", encoding="utf-8") as metrics:
        trainer.fit(Regressor(cfg, metrics, step_seconds), loader, ckpt_path=resume)
    log.info("exit 0 at step %d", trainer.global_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
