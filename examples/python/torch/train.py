"""A small PyTorch training, resumed exactly across a chain of jobs.

An MLP with dropout learns a synthetic regression task with AdamW, a step
LR schedule, a grad scaler, NumPy input noise and shuffled mini-batches, so a
resume has to restore every piece of state the user guide lists (weights,
optimizer, scheduler, scaler, the RNGs of Python, NumPy and torch, the data
position) to continue the loss curve exactly: chain.app.torch does that.
CPU-only here; the same code runs on a GPU (checkpoints load on either).

Environment (the chain contract plus a few knobs):
  MAX_ITER, CKPT_PATH, CHECKPOINT_EVERY   optimizer steps, progress counter, save every N steps
  STEP_SECONDS      extra sleep per step, so this toy needs several runners (default 0.1)
  TRAIN_CKPT_DIR    checkpoint directory (default checkpoints)
  TRAIN_METRICS     per-step losses, CSV "step,loss" (default metrics.csv)
  TRAIN_RUN_LOG     run log, appended (default train_run.log)
Exit codes: 0 done, 99 stopped on the stop signal or deadline, 75 on a
termination warning.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    import chain.app as ca
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import chain.app as ca
from chain.app.torch import ResumableSampler, TorchCheckpoint, TrainLoop

log = logging.getLogger("train")


@dataclass(frozen=True)
class Config:
    """Everything that defines the run; stored in every checkpoint's manifest."""

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


class Training:
    """Model, optimizer, LR schedule and grad scaler, and one optimizer step."""

    def __init__(self, cfg: Config, device: torch.device) -> None:
        self.cfg, self.device = cfg, device
        self.model = nn.Sequential(
            nn.Linear(cfg.features, cfg.hidden),
            nn.Tanh(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, 1),
        ).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=cfg.lr_every, gamma=0.5)
        # On a GPU with float16 autocast the scaler keeps small gradients alive;
        # here it only shows where it goes (its state is checkpointed too).
        self.scaler = torch.amp.GradScaler(device.type, growth_interval=50)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One optimizer step on a batch (with NumPy input noise); its loss."""
        x, y = x.to(self.device), y.to(self.device)
        noise = np.random.normal(0, self.cfg.input_noise, tuple(x.shape))
        loss = nn.functional.mse_loss(self.model(x + torch.from_numpy(noise).float().to(x)), y)
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.sched.step()
        return loss.item()

    def eval_loss(self, data: TensorDataset) -> float:
        """Full-data loss without dropout: picks the best checkpoint."""
        self.model.eval()
        with torch.no_grad():
            x, y = (t.to(self.device) for t in data.tensors)
            loss = nn.functional.mse_loss(self.model(x), y)
        self.model.train()
        return float(loss)


def main() -> int:
    env = ca.AppEnv.from_environ(max_iter=300, checkpoint_every=50, ckpt_path="train_step.txt")
    step_seconds = float(os.environ.get("STEP_SECONDS", "0.1"))
    metrics_path = Path(os.environ.get("TRAIN_METRICS", "metrics.csv"))
    ca.configure_logging(os.environ.get("TRAIN_RUN_LOG", "train_run.log"))
    torch.set_num_threads(1)  # a small model: one thread is fastest, and kind to shared nodes

    cfg = Config()
    # Seeds for a fresh start (initial weights, dropout, noise); on a resume the
    # checkpoint's RNG states replace them.
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    data = make_data(cfg)
    sampler = ResumableSampler(data, seed=cfg.seed)
    loader = DataLoader(data, batch_size=cfg.batch, sampler=sampler)
    tr = Training(cfg, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    ckpt = TorchCheckpoint(
        os.environ.get("TRAIN_CKPT_DIR", "checkpoints"),
        model=tr.model,
        optimizer=tr.opt,
        scheduler=tr.sched,
        scaler=tr.scaler,
        sampler=sampler,
        counter_path=env.ckpt_path,
        meta=asdict(cfg),
    )
    loop = TrainLoop(ckpt, env=env, metric=lambda: tr.eval_loss(data))
    loop.restore()
    log.info("start at step %d (job %s)", loop.progress.step, env.job_id or "-")
    keep_rows_up_to(metrics_path, loop.progress.step)
    with open(metrics_path, "a", encoding="utf-8") as metrics:
        for x, y in loop.batches(loader):
            loss = tr.step(x, y)
            metrics.write(f"{loop.progress.step + 1},{loss!r}\n")
            metrics.flush()
            if step_seconds:
                time.sleep(step_seconds)
    log.info("exit %d at step %d", loop.exit_code, loop.progress.step)
    return int(loop.exit_code or 0)


if __name__ == "__main__":
    sys.exit(main())
