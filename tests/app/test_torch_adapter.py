"""chain.app.torch in-process, on real torch (CPU): RNG capture, the sampler,
TorchCheckpoint and TrainLoop.

The loop test stops a training with real SIGTERMs at chosen steps (one at an
epoch boundary) and resumes it each time into freshly built objects with
scrambled global RNGs, as a new process would: the loss of every step and the
final model, optimizer, scheduler, scaler and RNG states must equal those of
an uninterrupted run bit for bit.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chain.app import StopMonitor, read_counter

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from chain.app.torch import (
        STATE_FILE,
        Progress,
        ResumableSampler,
        TorchCheckpoint,
        TrainLoop,
        rng_state,
        set_rng_state,
    )

    MISSING = None
except ImportError as exc:  # installed by the suite's setup: fail, never skip
    MISSING = f"{exc}; torch is installed by `bash scripts/setup --dev`"


@pytest.fixture(autouse=True)
def _torch_installed() -> None:
    if MISSING:
        pytest.fail(MISSING, pytrace=False)


STEPS = 23  # 5 batches an epoch: the run ends mid-epoch
EVERY = 4


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Recursive equality, tensors compared bit for bit (dtype, shape, values)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def first_weight(model: nn.Sequential) -> torch.Tensor:
    layer = model[0]
    assert isinstance(layer, nn.Linear)
    return layer.weight


@dataclass
class Run:
    ckpt: TorchCheckpoint
    loader: DataLoader[Any]
    model: nn.Sequential
    opt: torch.optim.Optimizer
    sched: Any
    scaler: torch.amp.GradScaler


def build(root: Path, init_seed: int) -> Run:
    """A fresh training set-up; ``init_seed`` only scrambles what a restore must overwrite."""
    torch.manual_seed(init_seed)
    np.random.seed(init_seed)
    random.seed(init_seed)
    g = torch.Generator().manual_seed(5)
    data = TensorDataset(torch.randn(40, 4, generator=g), torch.randn(40, 1, generator=g))
    sampler = ResumableSampler(data, seed=11)
    # No generator=: iter(loader) draws from the global RNG, which the loop must absorb.
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.2), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", growth_interval=3)
    ckpt = TorchCheckpoint(
        root / "ck",
        model=model,
        optimizer=opt,
        scheduler=sched,
        scaler=scaler,
        sampler=sampler,
        counter_path=root / "counter",
        meta={"test": True},
    )
    return Run(ckpt, loader, model, opt, sched, scaler)


def monitor(tmp: Path, **kw: Any) -> StopMonitor:
    return StopMonitor(podinfo=tmp / "podinfo", environ={}, **kw)


def train(
    run: Run,
    tmp: Path,
    losses: dict[int, list[str]],
    stop_at: int | None = None,
    mon: StopMonitor | None = None,
    margin: float = 5.0,
    sleep: float = 0.0,
) -> int:
    loop = TrainLoop(
        run.ckpt,
        max_steps=STEPS,
        every_steps=EVERY,
        monitor=mon or monitor(tmp),
        metric=lambda: float(first_weight(run.model).detach().sum()),
        margin_seconds=margin,
    )
    for x, y in loop.batches(run.loader):
        # all three RNGs feed the loss: NumPy and Python noise, torch dropout
        x = x + torch.from_numpy(np.random.normal(0, 0.1, x.shape)).float() + random.gauss(0, 0.1)
        loss = nn.functional.mse_loss(run.model(x), y)
        run.opt.zero_grad()
        run.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        run.scaler.step(run.opt)
        run.scaler.update()
        run.sched.step()
        step = loop.progress.step + 1
        losses.setdefault(step, []).append(repr(loss.item()))
        if step == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)  # handled as a flag: saved at this boundary
        time.sleep(sleep)
    assert loop.exit_code is not None
    return loop.exit_code


def final_state(root: Path) -> dict[str, Any]:
    d = root / "ck" / f"ckpt-{STEPS:012d}.d"
    state: dict[str, Any] = torch.load(d / STATE_FILE, weights_only=True)
    return state


def test_rng_state_roundtrips_through_weights_only_load(tmp_path: Path) -> None:
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached gauss_next behind
    torch.save(rng_state(), tmp_path / "rng.pt")
    first = (
        random.random(),
        random.gauss(0, 1),
        np.random.normal(size=3).tolist(),
        torch.rand(3).tolist(),
    )
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    again = (
        random.random(),
        random.gauss(0, 1),
        np.random.normal(size=3).tolist(),
        torch.rand(3).tolist(),
    )
    assert again == first


def test_sampler_order_is_a_function_of_seed_and_epoch() -> None:
    before = torch.get_rng_state()
    s = ResumableSampler(50, seed=3)
    e0, e1 = list(s), s.order(1)
    assert sorted(e0) == list(range(50)) and e0 != e1 and e0 == ResumableSampler(50, seed=3).order(0)
    s.resume_at(1, 20)
    assert list(s) == e1[20:] and len(s) == 50  # len stays the full epoch
    s.set_epoch(1)
    assert list(s) == e1[20:]  # same epoch: position kept
    s.set_epoch(2)
    assert list(s) == s.order(2)  # a new epoch starts at its beginning
    assert torch.equal(torch.get_rng_state(), before)  # the global RNG is never touched


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stopped_by_signals_and_resumed_equals_uninterrupted(tmp_path: Path, seed: int) -> None:
    ref_losses: dict[int, list[str]] = {}
    ref_run = build(tmp_path / "ref", 0)
    assert train(ref_run, tmp_path, ref_losses) == 0
    assert sorted(ref_losses) == list(range(1, STEPS + 1))

    losses: dict[int, list[str]] = {}
    # three random steps and 5, the last batch of epoch 0
    stops = sorted({5, *random.Random(seed).sample(range(1, STEPS), 3)})
    for n, stop_at in enumerate(stops):
        # the first run starts as the reference; the resumed ones from scrambled RNGs
        code = train(build(tmp_path / "run", 100 + n if n else 0), tmp_path, losses, stop_at)
        assert code == 99
        assert read_counter(tmp_path / "run" / "counter") == stop_at  # nothing computed is lost
    last = build(tmp_path / "run", 999)
    assert train(last, tmp_path, losses) == 0

    assert losses == ref_losses  # every step once, each loss bit-identical
    assert read_counter(tmp_path / "run" / "counter") == STEPS
    ref, got = final_state(tmp_path / "ref"), final_state(tmp_path / "run")
    assert_same(got["objects"], ref["objects"], "objects")  # model, optimizer, scheduler, scaler
    assert_same(got["rng"], ref["rng"], "rng")
    assert got["progress"] == ref["progress"] == {"step": STEPS, "epoch": 4, "batch": 3}
    for name in ("model", "opt", "sched", "scaler"):  # the live objects too, not just the files
        assert_same(getattr(last, name).state_dict(), getattr(ref_run, name).state_dict(), name)


def test_counter_is_written_only_after_the_checkpoint_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chain.app.store as store_mod

    seen: list[int] = []
    real = store_mod.write_counter  # type: ignore[attr-defined]  # the name store.py calls

    def checked(path: Any, value: int) -> None:
        d = tmp_path / "ck" / f"ckpt-{value:012d}.d"
        assert (d / "DONE").is_file() and (d / STATE_FILE).is_file(), "counter ahead of checkpoint"
        assert not [p for p in d.parent.iterdir() if p.name.startswith(".tmp-")]
        seen.append(value)
        real(path, value)

    monkeypatch.setattr(store_mod, "write_counter", checked)
    run = build(tmp_path, 0)
    assert train(run, tmp_path, {}) == 0
    assert seen == [4, 8, 12, 16, 20, 23]
    # retention: the last two and the best (highest metric here is not asked: MIN)
    kept = [i.step for i in run.ckpt.store.checkpoints()]
    assert kept[-2:] == [20, 23] and len(kept) <= 3


def test_corrupt_newest_checkpoint_is_skipped(tmp_path: Path) -> None:
    run = build(tmp_path, 0)
    saved = {}
    for step in (4, 8, 12):
        with torch.no_grad():
            first_weight(run.model).add_(1.0)
        run.ckpt.save(Progress(step=step, epoch=0, batch=step))
        saved[step] = first_weight(run.model).clone()
    newest = tmp_path / "ck" / "ckpt-000000000012.d" / STATE_FILE
    blob = bytearray(newest.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    newest.write_bytes(bytes(blob))

    fresh = build(tmp_path, 1)
    resumed = fresh.ckpt.restore()
    assert resumed is not None and resumed.progress.step == 8
    assert resumed.skipped and "corrupt" in resumed.skipped[0]
    assert torch.equal(first_weight(fresh.model), saved[8])
    assert (tmp_path / "ck" / "ckpt-000000000012.d.corrupt").is_dir()  # kept as evidence
    assert read_counter(tmp_path / "counter") == 8  # never claims the corrupt step


def test_termination_warning_saves_and_exits_75(tmp_path: Path) -> None:
    pod = tmp_path / "podinfo"
    pod.mkdir()
    mon = monitor(tmp_path)
    run = build(tmp_path, 0)
    loop = TrainLoop(run.ckpt, max_steps=STEPS, every_steps=EVERY, monitor=mon)
    for x, y in loop.batches(run.loader):
        if loop.progress.step == 2:  # a warning 30 s ahead: within the 60 s warning margin
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
            (pod / "termination-warning-at").write_text(stamp)
    assert loop.exit_code == 75 and loop.progress.step == 3
    assert read_counter(tmp_path / "counter") == 3


def test_deadline_stops_before_it_with_99(tmp_path: Path) -> None:
    deadline = time.time() + 1.0
    code = train(
        build(tmp_path, 0),
        tmp_path,
        {},
        mon=monitor(tmp_path, deadline=deadline),
        margin=0.3,
        sleep=0.05,
    )
    assert code == 99 and time.time() < deadline
    step = read_counter(tmp_path / "counter")
    assert step is not None and 0 < step < STEPS


def test_sampler_shares_each_epoch_between_ranks_and_resumes_within_a_share() -> None:
    """ResumableSampler(num_replicas, rank): the ranks' shares together
    cover the epoch (padded by repetition, as DistributedSampler), each of the
    same length; resume_at counts this rank's samples."""
    shares = [ResumableSampler(10, seed=3, num_replicas=3, rank=r) for r in range(3)]
    whole = ResumableSampler(10, seed=3).order(0)
    assert [len(s) for s in shares] == [4, 4, 4]
    dealt = [list(s) for s in shares]
    assert sorted(i for share in dealt for i in share) == sorted(whole + whole[:2])
    assert dealt[1] == (whole + whole[:2])[1::3]
    shares[1].resume_at(0, 3)
    assert list(shares[1]) == dealt[1][3:]
    with pytest.raises(ValueError, match="rank 3"):
        ResumableSampler(10, num_replicas=3, rank=3)
