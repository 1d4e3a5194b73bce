"""chain.app.lightning.ChainCallback in-process, on a real lightning.Trainer (CPU).

* Stopped by real SIGTERMs at chosen steps (one at an epoch's last batch)
  and resumed each time into a fresh Trainer, model and scrambled global
  RNGs: every step's loss, the final weights, optimizer, scheduler and RNG
  states equal an uninterrupted fit's bit for bit.
* A corrupt newest checkpoint is skipped (and quarantined) on resume.
* Lightning's SLURM auto-requeue is off: under a SLURM-like environment with
  a fake ``scontrol`` first on PATH that records its calls, SIGUSR1 and
  SIGTERM make the callback save and exit 99, and ``scontrol`` is never
  called; the same fit without the callback does call ``scontrol requeue``
  (the control that shows the fake would catch it).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from chain.app import AppEnv, StopMonitor, read_counter

from .test_torch_adapter import assert_same

try:
    import lightning as L
    import numpy as np
    import torch
    from lightning.fabric.plugins.environments.slurm import SLURMEnvironment
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from chain.app.lightning import CKPT_FILE, ChainCallback
    from chain.app.torch import ResumableSampler

    MISSING = None
except ImportError as exc:  # installed by the suite's setup: fail, never skip
    MISSING = f"{exc}; torch and lightning are installed by `bash scripts/setup --dev`"
    L = None  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _lightning_installed() -> None:
    if MISSING:
        pytest.fail(MISSING, pytrace=False)


STEPS = 23  # 5 batches an epoch
EVERY = 4
LightningModule: Any = L.LightningModule if L else object
Callback: Any = L.Callback if L else object


class Tiny(LightningModule):  # type: ignore[misc]
    def __init__(self, losses: dict[int, list[str]], epoch_ends: list[int]) -> None:
        super().__init__()
        self.losses, self.epoch_ends = losses, epoch_ends
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.2), nn.Linear(8, 1))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        # all three RNGs feed the loss: NumPy and Python noise, torch dropout
        x = x + torch.from_numpy(np.random.normal(0, 0.1, tuple(x.shape))).float() + random.gauss(0, 0.1)
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        self.losses.setdefault(self.global_step + 1, []).append(repr(loss.item()))
        return loss

    def on_train_epoch_end(self) -> None:
        self.epoch_ends.append(self.current_epoch)

    def configure_optimizers(self) -> Any:
        opt = torch.optim.Adam(self.parameters(), lr=0.05)
        # one schedule stepped per optimizer step, one per epoch: a resume must miss neither
        by_step = torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5)
        by_epoch = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
        return [opt], [
            {"scheduler": by_step, "interval": "step"},
            {"scheduler": by_epoch, "interval": "epoch"},
        ]


class SignalAt(Callback):  # type: ignore[misc]
    """Sends a real signal to this process after step ``step`` (before the
    chain callback's hook: Lightning runs Checkpoint callbacks last); with
    ``signum`` None, crashes there instead (no save)."""

    def __init__(self, step: int | None, signum: int | None = signal.SIGTERM) -> None:
        self.step, self.signum = step, signum

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.step:
            if self.signum is None:
                raise RuntimeError("crash")
            os.kill(os.getpid(), self.signum)


def fit(
    root: Path,
    init_seed: int,
    losses: dict[int, list[str]],
    stop_at: int | None = None,
    signum: int | None = signal.SIGTERM,
    chain_cb: bool = True,
    epochs: int | None = None,
    epoch_ends: list[int] | None = None,
) -> tuple[int, Any]:
    """One process's worth of fit (``epochs``: the counter counts epochs, the
    fit runs that many); returns (exit code, trainer)."""
    torch.manual_seed(init_seed)
    np.random.seed(init_seed)
    random.seed(init_seed)
    g = torch.Generator().manual_seed(5)
    data = TensorDataset(torch.randn(40, 4, generator=g), torch.randn(40, 1, generator=g))
    sampler = ResumableSampler(data, seed=11)
    loader = DataLoader(data, batch_size=8, sampler=sampler)  # no generator=: the hard case
    env = AppEnv(
        max_iter=STEPS,
        ckpt_path=root / "counter",
        checkpoint_every=1 if epochs else EVERY,
        deadline=None,
        stop_signal="TERM",
        shell_helpers=root,
        job_id=None,
    )
    callbacks: list[Any] = [SignalAt(stop_at, signum)]
    resume = None
    if chain_cb:
        cb = ChainCallback(
            root / "ck",
            sampler=sampler,
            unit="epochs" if epochs else "steps",
            monitor="train_loss",
            env=env,
            stop_monitor=StopMonitor(podinfo=root / "podinfo", environ={}),
        )
        callbacks.append(cb)
        resume = cb.resume_path()
    trainer = L.Trainer(
        max_steps=-1 if epochs else STEPS,
        max_epochs=epochs or -1,
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        accelerator="cpu",
        devices=1,
        default_root_dir=root,
    )
    try:
        trainer.fit(Tiny(losses, [] if epoch_ends is None else epoch_ends), loader, ckpt_path=resume)
    except SystemExit as exc:
        return int(exc.code or 0), trainer
    return 0, trainer


def live_state(trainer: Any) -> dict[str, Any]:
    return {
        "model": trainer.lightning_module.state_dict(),
        "optimizer": trainer.optimizers[0].state_dict(),
        "schedulers": [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs],
    }


def saved(root: Path, step: int) -> dict[str, Any]:
    path = root / "ck" / f"ckpt-{step:012d}.d" / CKPT_FILE
    state: dict[str, Any] = torch.load(path, weights_only=False)
    return state


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, list[str]], Any]:
    if MISSING:  # module fixtures come before the autouse check
        pytest.fail(MISSING, pytrace=False)
    root = tmp_path_factory.mktemp("ref")
    losses: dict[int, list[str]] = {}
    code, trainer = fit(root, 0, losses)
    assert code == 0 and sorted(losses) == list(range(1, STEPS + 1))
    assert read_counter(root / "counter") == STEPS
    return root, losses, live_state(trainer)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stopped_by_signals_and_resumed_equals_uninterrupted(
    tmp_path: Path, reference: tuple[Path, dict[int, list[str]], Any], seed: int
) -> None:
    ref_root, ref_losses, ref_live = reference
    losses: dict[int, list[str]] = {}
    # three random steps and 5, the last batch of epoch 0
    stops = sorted({5, *random.Random(seed).sample(range(1, STEPS), 3)})
    for n, stop_at in enumerate(stops):
        # the first fit starts as the reference; the resumed ones from scrambled RNGs
        code, _ = fit(tmp_path, 100 + n if n else 0, losses, stop_at=stop_at)
        assert code == 99
        assert read_counter(tmp_path / "counter") == stop_at  # nothing computed is lost
    code, trainer = fit(tmp_path, 999, losses)
    assert code == 0 and read_counter(tmp_path / "counter") == STEPS
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    assert losses == ref_losses  # every step once, each loss bit-identical
    assert_same(live_state(trainer), ref_live, "live")
    got, ref = saved(tmp_path, STEPS), saved(ref_root, STEPS)
    assert_same(got["state_dict"], ref["state_dict"], "weights")
    assert_same(got["optimizer_states"], ref["optimizer_states"], "optimizer")
    assert_same(got["lr_schedulers"], ref["lr_schedulers"], "scheduler")
    assert_same(got["callbacks"], ref["callbacks"], "callbacks")  # RNG states included
    assert got["global_step"] == ref["global_step"] == STEPS


def test_corrupt_newest_checkpoint_is_skipped(
    tmp_path: Path, reference: tuple[Path, dict[int, list[str]], Any]
) -> None:
    ref_root, ref_losses, ref_live = reference
    shutil.copytree(ref_root / "ck", tmp_path / "ck")
    shutil.copy(ref_root / "counter", tmp_path / "counter")
    newest = tmp_path / "ck" / f"ckpt-{STEPS:012d}.d" / CKPT_FILE
    blob = bytearray(newest.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    newest.write_bytes(bytes(blob))

    losses: dict[int, list[str]] = {}
    code, trainer = fit(tmp_path, 7, losses)
    assert code == 0
    assert (tmp_path / "ck" / f"ckpt-{STEPS:012d}.d.corrupt").is_dir()
    assert sorted(losses) == [21, 22, 23]  # resumed from step 20, the previous one
    assert all(losses[s] == ref_losses[s] for s in losses)
    assert_same(live_state(trainer), ref_live, "live")
    assert read_counter(tmp_path / "counter") == STEPS


def test_epoch_counter_stopped_mid_epoch_and_at_an_epoch_end(
    tmp_path: Path, reference: tuple[Path, dict[int, list[str]], Any]
) -> None:
    """unit="epochs": the counter holds completed epochs, never the one in
    progress; a stop at an epoch's last batch saves at its end; a crash
    resumes from an end-of-epoch save; every epoch-end hook runs once."""
    _, ref_losses, _ = reference
    losses: dict[int, list[str]] = {}
    ends: list[int] = []
    for n, (stop_at, completed) in enumerate([(7, 1), (10, 2)]):  # 10: epoch 1's last batch
        code, _ = fit(tmp_path, 100 + n if n else 0, losses, stop_at, epochs=4, epoch_ends=ends)
        assert code == 99 and read_counter(tmp_path / "counter") == completed
    with pytest.raises(RuntimeError, match="crash"):  # after epoch 2's end-of-epoch save
        fit(tmp_path, 50, losses, stop_at=17, signum=None, epochs=4, epoch_ends=ends)
    assert read_counter(tmp_path / "counter") == 3
    code, _ = fit(tmp_path, 999, losses, epochs=4, epoch_ends=ends)
    assert code == 0 and read_counter(tmp_path / "counter") == 4
    assert sorted(losses) == list(range(1, 21))
    assert losses[16] == ref_losses[16] * 2 and losses[17] == ref_losses[17] * 2  # redone
    assert all(set(v) == set(ref_losses[s]) for s, v in losses.items())
    assert ends == [0, 1, 2, 3]


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SLURM job's environment and a recording ``scontrol`` first on PATH."""
    calls = tmp_path / "scontrol.calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name, value in {
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": "1",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NAME": "chain-runner",
    }.items():
        monkeypatch.setenv(name, value)
    assert SLURMEnvironment.detect()
    return calls


def test_lightning_requeues_by_itself_without_the_callback(tmp_path: Path, fake_slurm: Path) -> None:
    """The control: the fake scontrol catches Lightning's own requeue."""
    code, _ = fit(tmp_path, 0, {}, stop_at=3, signum=signal.SIGUSR1, chain_cb=False)
    assert code == 0  # Lightning saved an hpc checkpoint, requeued, and trained on
    assert fake_slurm.read_text().split() == ["requeue", "4242"]


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM], ids=["USR1", "TERM"])
def test_requeue_is_off_under_the_callback(tmp_path: Path, fake_slurm: Path, signum: int) -> None:
    code, trainer = fit(tmp_path, 0, {}, stop_at=3, signum=signum)
    env = trainer._accelerator_connector.cluster_environment
    assert isinstance(env, SLURMEnvironment) and env.auto_requeue is False
    assert code == 99 and read_counter(tmp_path / "counter") == 3
    assert not fake_slurm.exists(), fake_slurm.read_text()  # scontrol never ran
    assert not list(tmp_path.glob("hpc_ckpt_*.ckpt"))
    for sig in (signal.SIGTERM, signal.SIGUSR1):  # handlers given back, nothing left behind
        assert signal.getsignal(sig) is signal.SIG_DFL
