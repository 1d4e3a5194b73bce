"""ChainCallback without surprises, in-process on a real
lightning.Trainer (CPU):

* a train loader that a mid-epoch resume would restart (``shuffle=True``) is
  warned about once per fit (a runner), on stderr and in the chain's ``chain.log``,
  naming the fix; one with the callback's ResumableSampler is not;
* a fit given no ``ckpt_path`` (LightningCLI's) resumes by itself, bit for
  bit as one given ``resume_path()``; a ``ckpt_path`` of the user's that
  would replace that resume is refused.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path
from typing import Any

import pytest

from chain.app import AppEnv, StopMonitor, read_counter

from .test_lightning_callback import MISSING, SignalAt, Tiny

try:
    import lightning as L
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, IterableDataset, TensorDataset

    from chain.app import lightning as chain_lightning
    from chain.app.lightning import ChainCallback, ResumableSampler, resume_gap
except ImportError:  # test_lightning_callback's MISSING says why, and fails
    pass

STEPS = 12  # 5 batches an epoch: stops land mid-epoch
WARNING = "chain: WARNING: the train dataloader cannot resume mid-epoch"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Lightning installed, a chain's log to write to."""
    if MISSING:
        pytest.fail(MISSING, pytrace=False)
    chain_dir = tmp_path / "chaindir"
    chain_dir.mkdir()
    (chain_dir / "chain.log").write_text("")
    monkeypatch.setenv("CHAIN_DIR", str(chain_dir))
    return chain_dir / "chain.log"


def data() -> Any:
    g = torch.Generator().manual_seed(5)
    return TensorDataset(torch.randn(40, 4, generator=g), torch.randn(40, 1, generator=g))


def fit(
    root: Path,
    loader: Any,
    *,
    sampler: Any = None,
    stop_at: int | None = None,
    ckpt: str | None | bool = True,
    losses: dict[int, list[str]] | None = None,
    seed: int = 0,
    strategy: Any = "auto",
) -> int:
    """One runner's fit; ``ckpt``: True passes ``resume_path()``, False
    nothing (as LightningCLI does), a string that path.  ``seed``: the
    global RNGs' at the start (a resume must not depend on it)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    env = AppEnv(
        max_iter=STEPS,
        ckpt_path=root / "counter",
        checkpoint_every=4,
        deadline=None,
        stop_signal="TERM",
        shell_helpers=root,
        job_id=None,
    )
    cb = ChainCallback(
        root / "ck", sampler=sampler, env=env, stop_monitor=StopMonitor(podinfo=root / "podinfo", environ={})
    )
    path = cb.resume_path() if ckpt is True else (ckpt or None)
    trainer = L.Trainer(
        max_steps=STEPS,
        callbacks=[SignalAt(stop_at, signal.SIGTERM), cb],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        default_root_dir=root,
        strategy=strategy,
    )
    try:
        trainer.fit(Tiny({} if losses is None else losses, []), loader, ckpt_path=path)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_a_shuffling_loader_is_warned_about_once_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], _fresh: Path
) -> None:
    loader = DataLoader(data(), batch_size=8, shuffle=True)
    assert fit(tmp_path, loader, stop_at=3) == 99
    assert fit(tmp_path, loader) == 0  # the resumed runner: says it again, once
    err = capsys.readouterr().err
    assert err.count(WARNING) == 2, err
    assert f"{WARNING}: its sampler (RandomSampler) starts every epoch from the beginning" in err
    assert "chain: fix: sampler = chain.app.lightning.ResumableSampler(dataset, seed=0)" in err
    assert "ChainCallback(..., sampler=sampler)" in err
    first, _ = _fresh.read_text().splitlines()  # one line a fit
    line = first
    assert "app (pid " in line and "WARNING: the train dataloader cannot resume mid-epoch" in line
    assert "fix: sampler = chain.app.lightning.ResumableSampler(dataset, seed=0)" in line


def test_the_callbacks_resumable_sampler_is_not_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], _fresh: Path
) -> None:
    dataset = data()
    sampler = ResumableSampler(dataset, seed=3)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    assert resume_gap(loader, sampler) is None and resume_gap(loader) is not None
    assert fit(tmp_path, loader, sampler=sampler, stop_at=3) == 99
    assert fit(tmp_path, loader, sampler=sampler) == 0
    assert "cannot resume mid-epoch" not in capsys.readouterr().err
    assert _fresh.read_text() == ""


class Stateful(DataLoader):  # type: ignore[type-arg]
    """A loader Lightning saves and restores itself (as torchdata's StatefulDataLoader)."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class Stream(IterableDataset):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        return iter(range(4))


def test_resume_gap_tells_each_kind_of_loader() -> None:
    dataset = data()
    other = ResumableSampler(dataset)
    assert resume_gap(Stateful(dataset, shuffle=True)) is None
    assert "SequentialSampler" in str(resume_gap(DataLoader(dataset, batch_size=4)))
    assert "not the one given to ChainCallback" in str(
        resume_gap(DataLoader(dataset, sampler=other), ResumableSampler(dataset))
    )
    assert "IterableDataset" in str(resume_gap(DataLoader(Stream(), batch_size=2)))
    assert "starts every epoch" in str(resume_gap([torch.zeros(2)]))  # not a DataLoader


def test_a_fit_given_no_ckpt_path_resumes_by_itself(tmp_path: Path) -> None:
    """LightningCLI's fit: no ``ckpt_path``; the resume equals an uninterrupted run's."""

    def run(root: Path, stop_at: int | None, ckpt: bool, losses: dict[int, list[str]], seed: int = 0) -> int:
        dataset = data()
        sampler = ResumableSampler(dataset, seed=3)
        loader = DataLoader(dataset, batch_size=8, sampler=sampler)
        return fit(root, loader, sampler=sampler, stop_at=stop_at, ckpt=ckpt, losses=losses, seed=seed)

    reference: dict[int, list[str]] = {}
    assert run(tmp_path / "ref", None, True, reference) == 0
    losses: dict[int, list[str]] = {}
    assert run(tmp_path, 7, False, losses) == 99 and read_counter(tmp_path / "counter") == 7
    assert run(tmp_path, None, False, losses, seed=99) == 0
    assert read_counter(tmp_path / "counter") == STEPS
    assert losses == reference  # every step once, each loss bit-identical


def test_a_users_ckpt_path_beside_the_unasked_resume_is_refused(tmp_path: Path) -> None:
    loader = DataLoader(data(), batch_size=8, shuffle=True)
    assert fit(tmp_path, loader, stop_at=9) == 99  # saves at 4, 8 and 9
    older = tmp_path / "ck" / f"ckpt-{8:012d}.d" / chain_lightning.CKPT_FILE
    with pytest.raises(RuntimeError, match="replaced the newest checkpoint"):
        fit(tmp_path, loader, ckpt=str(older))


def test_a_strategy_that_restores_after_its_setup_is_told_to_pass_the_path(tmp_path: Path) -> None:
    """FSDP, DeepSpeed, ModelParallel restore after their own setup: the callback
    cannot load a checkpoint before it, so a fit given no ckpt_path is refused
    with what to do (it used to blame a ckpt_path the user never gave)."""
    from lightning.pytorch.strategies import SingleDeviceStrategy

    class RestoresAfterSetup(SingleDeviceStrategy):
        @property
        def restore_checkpoint_after_setup(self) -> bool:
            return True

    loader = DataLoader(data(), batch_size=8, shuffle=False)
    assert fit(tmp_path, loader, stop_at=3) == 99
    with pytest.raises(RuntimeError, match="cannot resume it by itself: call trainer.fit"):
        fit(tmp_path, loader, ckpt=False, strategy=RestoresAfterSetup(device=torch.device("cpu")))
    assert fit(tmp_path, loader, strategy=RestoresAfterSetup(device=torch.device("cpu"))) == 0  # given the path
