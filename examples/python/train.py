"""A training-style loop that resumes bit-identically (stdlib only).

The "model" is a linear regressor trained with Adam on a fixed synthetic data
set, with shuffled mini-batches, a warm-up/decay learning-rate schedule and
gradient noise drawn from a seeded RNG.  A resumable checkpoint therefore has
to hold every one of: the weights, the optimizer moments and step, the RNG
state, and the data position (epoch, permutation, index).  Drop any one and
the loss curve jumps at the resume; with all of them a run killed at any step
and resumed produces exactly the curve and final state of an uninterrupted run.

Environment (the chain contract plus a few knobs):
  MAX_ITER, CKPT_PATH, CHECKPOINT_EVERY   steps, progress counter, save every N steps
  CHECKPOINT_SECONDS   also save every N seconds of wall time (default 900)
  TRAIN_CKPT_DIR       checkpoint store directory (default checkpoints)
  TRAIN_METRICS        per-step metric file, appended (default metrics.log)
  TRAIN_RUN_LOG        run log, appended (default train_run.log)
  ITER_SECONDS         extra sleep per step, to make a step cost time (default 0)
  ASYNC_SAVE=1         save in a background thread
Exit codes: 0 done, 99 stopped on the stop signal or deadline, 75 on a
termination warning.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

try:
    import chain.app as ca
except ImportError:  # run from a checkout without installing slurm-chain
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import chain.app as ca


@dataclass(frozen=True)
class Config:
    """Everything that defines the run; stored in every checkpoint's header."""

    seed: int = 1234
    dim: int = 8
    samples: int = 96
    batch: int = 8
    lr: float = 0.05
    warmup: int = 20
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    grad_noise: float = 0.01


def make_data(cfg: Config) -> list[tuple[list[float], float]]:
    """The fixed data set: derived from the seed, so it is not checkpointed."""
    rng = random.Random(cfg.seed)
    true_w = [rng.uniform(-1, 1) for _ in range(cfg.dim)]
    data = []
    for _ in range(cfg.samples):
        x = [rng.gauss(0, 1) for _ in range(cfg.dim)]
        y = sum(a * b for a, b in zip(true_w, x)) + 0.5 + rng.gauss(0, 0.1)
        data.append((x, y))
    return data


class Trainer:
    """Model, optimizer, RNG and data position, with state()/load_state()."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.data = make_data(cfg)
        self.rng = random.Random(cfg.seed + 1)
        self.w = [0.0] * (cfg.dim + 1)  # weights + bias
        self.m = [0.0] * len(self.w)  # Adam first moment
        self.v = [0.0] * len(self.w)  # Adam second moment
        self.step = 0
        self.epoch = 0
        self.perm: list[int] = []
        self.pos = 0
        self._new_epoch()

    def _new_epoch(self) -> None:
        self.perm = list(range(len(self.data)))
        self.rng.shuffle(self.perm)
        self.pos = 0

    def lr(self) -> float:
        """Linear warm-up, then cosine decay over 1000 steps."""
        c = self.cfg
        if self.step < c.warmup:
            return c.lr * (self.step + 1) / c.warmup
        return c.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (self.step - c.warmup) / 1000)))

    def train_step(self) -> float:
        """One mini-batch step; returns the batch loss before the update."""
        c = self.cfg
        if self.pos + c.batch > len(self.perm):
            self.epoch += 1
            self._new_epoch()
        idx = self.perm[self.pos : self.pos + c.batch]
        self.pos += c.batch
        grad = [0.0] * len(self.w)
        loss = 0.0
        for i in idx:
            x, y = self.data[i]
            err = sum(a * b for a, b in zip(self.w, x)) + self.w[-1] - y
            loss += err * err / len(idx)
            for k, xk in enumerate(x):
                grad[k] += 2 * err * xk / len(idx)
            grad[-1] += 2 * err / len(idx)
        lr = self.lr()
        self.step += 1
        for k, g in enumerate(grad):
            g += self.rng.gauss(0, c.grad_noise)
            self.m[k] = c.beta1 * self.m[k] + (1 - c.beta1) * g
            self.v[k] = c.beta2 * self.v[k] + (1 - c.beta2) * g * g
            mh = self.m[k] / (1 - c.beta1**self.step)
            vh = self.v[k] / (1 - c.beta2**self.step)
            self.w[k] -= lr * mh / (math.sqrt(vh) + c.eps)
        return loss

    def eval_loss(self) -> float:
        """Full-data loss: the metric that picks the best checkpoint."""
        total = 0.0
        for x, y in self.data:
            err = sum(a * b for a, b in zip(self.w, x)) + self.w[-1] - y
            total += err * err
        return total / len(self.data)

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly (fresh lists: safe to stage)."""
        version, internal, gauss_next = self.rng.getstate()
        return {
            "model": {"w": list(self.w)},
            "optimizer": {"m": list(self.m), "v": list(self.v), "step": self.step},
            "rng": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
            "data": {"epoch": self.epoch, "perm": list(self.perm), "pos": self.pos},
        }

    def load_state(self, s: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        self.w = [float(v) for v in s["model"]["w"]]
        self.m = [float(v) for v in s["optimizer"]["m"]]
        self.v = [float(v) for v in s["optimizer"]["v"]]
        self.step = int(s["optimizer"]["step"])
        r = s["rng"]
        self.rng.setstate((r["version"], tuple(r["internal"]), r["gauss_next"]))
        self.epoch = int(s["data"]["epoch"])
        self.perm = [int(i) for i in s["data"]["perm"]]
        self.pos = int(s["data"]["pos"])


def main() -> int:
    env = ca.AppEnv.from_environ(max_iter=300, checkpoint_every=25, ckpt_path="train_step.txt")
    step_sleep = float(os.environ.get("ITER_SECONDS", "0"))
    metrics_path = Path(os.environ.get("TRAIN_METRICS", "metrics.log"))
    runlog = ca.RunLog(os.environ.get("TRAIN_RUN_LOG", "train_run.log"), job_id=env.job_id)
    ca.configure_logging(os.environ.get("TRAIN_RUN_LOG", "train_run.log"))

    cfg = Config()
    trainer = Trainer(cfg)
    store = ca.CheckpointStore(
        os.environ.get("TRAIN_CKPT_DIR", "checkpoints"),
        counter_path=env.ckpt_path,
        keep_last=2,
        metric_mode=ca.MetricMode.MIN,
    )
    store.cleanup_temporaries()  # no save of ours can be in flight at startup
    restored = store.restore()
    if restored is not None:
        trainer.load_state(restored.state)
    runlog.start(trainer.step, resumed_from=restored.info.path.name if restored else "-")

    policy = ca.CheckpointPolicy(
        every_steps=env.checkpoint_every,
        every_seconds=float(os.environ.get("CHECKPOINT_SECONDS", "900")),
    )
    meter = ca.CostMeter()
    saver = ca.AsyncSaver() if os.environ.get("ASYNC_SAVE") == "1" else None
    monitor = ca.StopMonitor().install()
    committed = trainer.step

    def save(warning: bool) -> None:
        nonlocal committed
        step, state, metric = trainer.step, trainer.state(), trainer.eval_loss()

        def write(s: dict[str, Any]) -> None:
            with meter.measure():
                info = store.save(step, s, metric=metric, meta={"config": asdict(cfg)})
            runlog.checkpoint(step, info.path, warning, cost=meter.last or 0.0)

        if saver is None:
            write(state)
        else:
            saver.submit(write, state)
        policy.saved(meter.last)
        committed = step

    def finish(code: int, reason: str, warning: bool) -> int:
        if trainer.step != committed:
            save(warning)
        if saver is not None:
            saver.close()  # an unflushed asynchronous save is not a checkpoint
        runlog.stop(trainer.step, code, reason)
        return code

    with open(metrics_path, "a", encoding="utf-8") as metrics:
        while trainer.step < env.max_iter:
            # Lead: two saves and two steps, so a save started now finishes.
            lead = ca.lead_seconds(meter.worst, margin=max(1.0, 2 * step_sleep))
            status = monitor.status(lead)
            if status.exit_code is not None:
                reasons = " ".join(sorted(r.value for r in status.reasons))
                return finish(int(status.exit_code), reasons, status.warning_present)
            if status.guarantee_expired:
                policy.shorten(0.5)  # preemptible from now on: lose less per stop
            if monitor.urgent_save_due(status) and trainer.step != committed:
                save(status.warning_present)

            loss = trainer.train_step()
            metrics.write(f"{trainer.step} {loss!r}\n")
            metrics.flush()
            if step_sleep:
                time.sleep(step_sleep)
            if policy.due(trainer.step) is not None:
                save(status.warning_present)
    return finish(int(ca.ExitCode.DONE), "done", False)


if __name__ == "__main__":
    sys.exit(main())
