"""The zero-code path for LightningCLI users: ``ChainCallback``
given only by the config (``trainer.callbacks``, ``class_path``), the
script an unchanged ``LightningCLI(Model, DataModule)``. Two real runners
(subprocesses, CPU): the first stopped by SIGTERM mid-epoch exits 99 with
the counter at its step; the second, given no ``--ckpt_path``, resumes from
that checkpoint by itself and ends with exit 0 at MAX_ITER, every step run
once. The script's ``shuffle=True`` loader gets the loud warning on stderr.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from chain.app import read_counter

from .conftest import PYTHON, child_env

MAX_ITER = 12
STOP_AT = 7  # mid-epoch: 5 batches an epoch

SCRIPT = """
import os, signal
import torch
import lightning as L
from lightning.pytorch.cli import LightningCLI
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        print(f"step {self.global_step + 1}", flush=True)
        if self.global_step + 1 == int(os.environ.get("TEST_STOP_AT", "0")):  # the test's stop
            os.kill(os.getpid(), signal.SIGTERM)
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class Data(L.LightningDataModule):
    def train_dataloader(self):
        g = torch.Generator().manual_seed(5)
        data = TensorDataset(torch.randn(40, 4, generator=g), torch.randn(40, 1, generator=g))
        return DataLoader(data, batch_size=8, shuffle=True)


LightningCLI(Tiny, Data)
"""

CONFIG = """
trainer:
  accelerator: cpu
  devices: 1
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: chain.app.lightning.ChainCallback
      init_args:
        dirpath: checkpoints
        unit: steps
        every: 4
        every_seconds: 3600.0
        keep_last: 2
        mode: min
"""


def runner(run_dir: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """One runner's app, as the chain starts it: ``--trainer.max_steps $MAX_ITER``."""
    env = child_env(None, CKPT_PATH=str(run_dir / "counter"), MAX_ITER=str(MAX_ITER), **extra)
    argv = [PYTHON, "main.py", "fit", "--config", "cfg.yaml", "--trainer.max_steps", str(MAX_ITER)]
    return subprocess.run(argv, cwd=run_dir, env=env, capture_output=True, text=True, timeout=300, check=False)


def steps(out: str) -> list[int]:
    return [int(line.split()[1]) for line in out.splitlines() if line.startswith("step ")]


def test_the_callback_by_config_alone_chains_a_lightning_cli_script(tmp_path: Path) -> None:
    try:
        import jsonargparse  # noqa: F401 - what LightningCLI parses with
    except ImportError as exc:  # installed by the suite's setup: fail, never skip
        pytest.fail(
            f"{exc}; LightningCLI needs jsonargparse[signatures] (lightning's "
            "pytorch-extra), which `bash scripts/setup --dev` must install",
            pytrace=False,
        )
    (tmp_path / "main.py").write_text(textwrap.dedent(SCRIPT))
    (tmp_path / "cfg.yaml").write_text(CONFIG)

    first = runner(tmp_path, TEST_STOP_AT=str(STOP_AT))
    assert first.returncode == 99, first.stderr[-3000:]
    assert read_counter(tmp_path / "counter") == STOP_AT  # saved at the stop
    assert steps(first.stdout) == list(range(1, STOP_AT + 1))
    assert first.stderr.count("chain: WARNING: the train dataloader cannot resume mid-epoch") == 1
    assert "chain: fix: sampler = chain.app.lightning.ResumableSampler(" in first.stderr

    second = runner(tmp_path)  # no --ckpt_path: the callback resumes by itself
    assert second.returncode == 0, second.stderr[-3000:]
    assert read_counter(tmp_path / "counter") == MAX_ITER
    assert steps(second.stdout) == list(range(STOP_AT + 1, MAX_ITER + 1))
