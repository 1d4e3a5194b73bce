"""The app of ``bench/counter_handoff.py``: ``examples/python/app.py`` that
also keeps a small model's state with ``torch.save``, two ways
(``BENCH_COUNTER``):

  torch  the counter lives in the checkpoint, ``ckpt.pt`` = ``{"model": ...,
         "optimizer": ..., "iter": i, "best_val_loss": tensor, "config": ...}``
         as nanoGPT's (the chain reads it with ``--counter-cmd torch:ckpt.pt:iter``)
  file   the same ``ckpt.pt`` without the counter, and the counter in the
         contract's plain file CKPT_PATH (no ``--counter-cmd``)

Both import torch, build the same state and save it at every checkpoint, so
the two differ only in where the chain reads the counter. The iteration log
(``iterations.log``) has the usual events; the ``start`` event carries the
process's launch time (taken before any import), so a handoff (one run's
``exit`` → the next run's ``start``) is the chain's part alone; the app's
own start-up (import torch, load) goes to ``app_startup.log``.
"""

from __future__ import annotations

import time

LAUNCH = time.time()  # before the imports: the handoff ends here

import os
import sys
from pathlib import Path

import torch

from chain.app import AppEnv, ExitCode, StopMonitor, log_iteration, read_counter, write_counter

CKPT = Path("ckpt.pt")


def model_state(megabytes: float) -> dict[str, torch.Tensor]:
    """A transformer-like state_dict: 6 blocks of 8 tensors, about MEGABYTES of float32."""
    per_block = max(1, int(megabytes * (1 << 20) / 4 / 6))
    side = max(4, int((per_block / 6) ** 0.5))
    gen = torch.Generator().manual_seed(0)
    state: dict[str, torch.Tensor] = {}
    for b in range(6):
        for name, shape in (
            ("ln_1.weight", (side,)),
            ("attn.c_attn.weight", (3 * side, side)),
            ("attn.c_attn.bias", (3 * side,)),
            ("attn.c_proj.weight", (side, side)),
            ("ln_2.weight", (side,)),
            ("mlp.c_fc.weight", (side, side)),
            ("mlp.c_proj.weight", (side, side)),
            ("mlp.c_proj.bias", (side,)),
        ):
            state[f"transformer.h.{b}.{name}"] = torch.randn(shape, generator=gen)
    return state


def main() -> int:
    env = AppEnv.from_environ(max_iter=40, checkpoint_every=5)
    kind = os.environ.get("BENCH_COUNTER", "torch")
    iter_seconds = float(os.environ.get("ITER_SECONDS", "0.5"))
    lead = iter_seconds + 1.0
    if CKPT.exists():
        saved = torch.load(CKPT, map_location="cpu", weights_only=True)
        model = saved["model"]
        i = int(saved["iter"]) if kind == "torch" else read_counter(env.ckpt_path) or 0
    else:
        model = model_state(float(os.environ.get("BENCH_CKPT_MB", "8")))
        i = 0
    optimizer = {
        "state": {k: {"exp_avg": v.clone(), "step": torch.tensor(float(i))} for k, v in list(model.items())[:8]}
    }
    committed = i
    with open(
        os.environ.get("CHAIN_ITER_LOG", "iterations.log"), "a", encoding="utf-8"
    ) as fh:  # log_iteration's format, at the launch time
        fh.write(f"{LAUNCH:.3f} start {i} {os.environ.get('SLURM_JOB_ID') or '-'} {os.getpid()}\n")
    with open("app_startup.log", "a", encoding="utf-8") as fh:
        fh.write(f"{LAUNCH:.3f} {time.time() - LAUNCH:.3f} {kind}\n")

    def commit() -> None:
        nonlocal committed
        state = {
            "model": model,
            "optimizer": optimizer,
            "model_args": {"n_layer": 6, "n_head": 6},
            "best_val_loss": torch.tensor(1.0 / (1 + i)),
            "config": {"kind": kind},
        }
        if kind == "torch":
            state["iter"] = i
        tmp = CKPT.with_name(CKPT.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, CKPT)
        if kind == "file":
            write_counter(env.ckpt_path, i)
        committed = i
        log_iteration("ckpt", i)

    def finish(code: int) -> int:
        if i != committed:
            commit()
        log_iteration("exit", committed, code)
        return code

    with StopMonitor() as monitor:
        while i < env.max_iter:
            status = monitor.status(lead)
            if status.exit_code is not None:
                return finish(status.exit_code)
            if monitor.urgent_save_due(status) and i != committed:
                commit()
            time.sleep(iter_seconds)
            i += 1
            log_iteration("iter", i)
            if i % env.checkpoint_every == 0:
                commit()
        return finish(ExitCode.DONE)


if __name__ == "__main__":
    sys.exit(main())
