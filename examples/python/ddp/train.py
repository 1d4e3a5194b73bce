"""Distributed data-parallel training (DDP, gloo on CPUs) resumed exactly
across a chain of jobs, on one node or several.

Every rank trains an MLP with dropout and NumPy input noise on its share of
a synthetic regression set (``ResumableSampler(num_replicas, rank)``);
DDP averages the gradients. ``chain.app.torch`` keeps the ranks in step:
at every step boundary they agree (an all-reduce) whether to save or stop,
so a stop signal that reaches one rank stops all of them at the same step;
rank 0 writes the checkpoint, holding every rank's RNG state, and the
counter, while the others wait; every rank resumes from it. The gradients
are averaged by ``rank_order_mean``, which adds the ranks' values in rank
order whatever DDP's bucket layout (DDP lays its buckets out anew after a
process's first step, so with three ranks or more its own all-reduce would
make a resumed run drift from an uninterrupted one in the last bits).

Launch, one process per rank (the chain's ``--app-cmd``):
  srun:     ``--launch srun --nodes 2 --ntasks-per-node 1``: ranks from
            SLURM_PROCID/SLURM_NTASKS; rank 0 runs on the batch host, whose
            address srun gives (SLURM_LAUNCH_NODE_IPADDR); a port from the job id
  torchrun: ``--launcher torchrun --nodes 2 --nproc-per-node 2 --app-cmd train.py``:
            chain runs one torchrun a node and composes its line; RANK/WORLD_SIZE/MASTER_*
            set by torchrun
  by hand:  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in each process's
            environment (one process alone: WORLD_SIZE unset, no DDP)

Environment (the chain contract plus):
  MAX_ITER, CKPT_PATH, CHECKPOINT_EVERY   optimizer steps, progress counter, save every N steps
  STEP_SECONDS      extra sleep per step, so this toy needs several runners (default 0.1)
  TRAIN_CKPT_DIR    checkpoint directory (default checkpoints)
  TRAIN_METRICS     rank 0's per-step losses, CSV "step,loss" (default metrics.csv)
  DDP_STOP_AT       tests: "RANK:STEP" sends that rank alone the stop signal after STEP
  DDP_DEFAULT_ALLREDUCE  tests: "1" leaves DDP's own all-reduce (a resume of 3+ ranks then drifts)
Exit codes: 0 done, 99 stopped on the stop signal or deadline, 75 on a
termination warning: the same on every rank.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import random
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

try:
    import chain.app as ca
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import chain.app as ca
from chain.app.torch import ResumableSampler, TorchCheckpoint, TrainLoop, rank_order_mean

log = logging.getLogger("train")


@dataclass(frozen=True)
class Config:
    """Everything that defines the run; stored in every checkpoint's manifest."""

    seed: int = 1234
    samples: int = 512
    features: int = 16
    hidden: int = 32
    batch: int = 16  # per rank
    lr: float = 0.01
    dropout: float = 0.1
    input_noise: float = 0.05


def rendezvous() -> tuple[int, int, str]:
    """(rank, world size, init method) from torchrun's or srun's environment."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun, or by hand
        return int(env["RANK"]), int(env["WORLD_SIZE"]), "env://"
    if "SLURM_PROCID" in env and int(env.get("SLURM_NTASKS", "1")) > 1:  # srun, one task per rank
        # the batch host launched srun and runs rank 0 (its first task); a port from the job id
        port = 20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000
        host = env.get("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1")
        return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), f"tcp://{host}:{port}"
    return 0, 1, ""


def make_data(cfg: Config) -> TensorDataset:
    """The fixed data set, derived from the seed (so never checkpointed)."""
    g = torch.Generator().manual_seed(cfg.seed)
    x = torch.randn(cfg.samples, cfg.features, generator=g)
    w = torch.randn(cfg.features, 1, generator=g)
    y = torch.sin(x @ w) + 0.1 * torch.randn(cfg.samples, 1, generator=g)
    return TensorDataset(x, y)


def weights_digest(model: nn.Module) -> str:
    """A hash of the weights: equal digests, bit-identical models."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def stop_hook() -> tuple[int, int] | None:
    """DDP_STOP_AT=RANK:STEP (tests): one rank alone gets the stop signal."""
    raw = os.environ.get("DDP_STOP_AT", "")
    if not raw:
        return None
    rank, step = raw.split(":")
    return int(rank), int(step)


def main() -> int:
    env = ca.AppEnv.from_environ(max_iter=200, checkpoint_every=40, ckpt_path="train_step.txt")
    step_seconds = float(os.environ.get("STEP_SECONDS", "0.1"))
    rank, world, init = rendezvous()
    ca.configure_logging(f"train_rank{rank}.log")
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group(
            "gloo", init_method=init, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120)
        )
    cfg = Config()
    # fresh-start seeds, distinct per rank for dropout and noise; a resume replaces them
    random.seed(cfg.seed + rank)
    np.random.seed(cfg.seed + rank)
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    data = make_data(cfg)
    sampler = ResumableSampler(data, seed=cfg.seed, num_replicas=world, rank=rank)
    loader = DataLoader(data, batch_size=cfg.batch, sampler=sampler)
    model = nn.Sequential(
        nn.Linear(cfg.features, cfg.hidden), nn.Tanh(), nn.Dropout(cfg.dropout), nn.Linear(cfg.hidden, 1)
    )
    torch.manual_seed(cfg.seed + 1000 + rank)  # dropout masks differ per rank
    net: nn.Module = model
    if world > 1:
        ddp = DistributedDataParallel(model)
        if os.environ.get("DDP_DEFAULT_ALLREDUCE") != "1":  # tests: show the default drift
            # sums in rank order: with 3+ ranks a resumed run then ends bit-identical
            ddp.register_comm_hook(None, rank_order_mean)
        net = ddp
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    ckpt = TorchCheckpoint(
        os.environ.get("TRAIN_CKPT_DIR", "checkpoints"),
        model=model,
        optimizer=opt,
        sampler=sampler,
        counter_path=env.ckpt_path,
        meta=asdict(cfg),
    )
    loop = TrainLoop(ckpt, env=env)
    loop.restore()
    log.info("rank %d of %d: start at step %d (job %s)", rank, world, loop.progress.step, env.job_id or "-")
    hook = stop_hook()
    metrics_path = Path(os.environ.get("TRAIN_METRICS", "metrics.csv"))
    with open(metrics_path, "a", encoding="utf-8") if rank == 0 else open(os.devnull, "w") as metrics:
        for x, y in loop.batches(loader):
            noise = torch.from_numpy(np.random.normal(0, cfg.input_noise, tuple(x.shape))).float()
            loss = nn.functional.mse_loss(net(x + noise), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            metrics.write(f"{loop.progress.step + 1},{loss.item()!r}\n")
            metrics.flush()
            if hook == (rank, loop.progress.step + 1):
                os.kill(os.getpid(), signal.SIGTERM)
            if step_seconds:
                time.sleep(step_seconds)
    if rank == 0 and loop.exit_code == 0:
        Path("weights.sha256").write_text(weights_digest(model) + "\n")
    log.info("rank %d: exit %d at step %d", rank, loop.exit_code, loop.progress.step)
    if world > 1:
        dist.destroy_process_group()
    return int(loop.exit_code or 0)


if __name__ == "__main__":
    sys.exit(main())
