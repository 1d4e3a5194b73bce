"""A training script of nanoGPT's shape (its ``train.py``): an app
written with no thought of chain, chained with no line changed.

Like nanoGPT it keeps its progress only in its own checkpoint
(``out/ckpt.json``, ``iter_num``; ``--ckpt_format=torch``: ``out/ckpt.pt``
by ``torch.save``), resumes only with ``--init_from=resume`` and then needs
a checkpoint (a missing one is a crash), saves every ``eval_interval``
iterations with a plain, non-atomic write, prints ``iter N: loss ...`` per
iteration, has no signal handler (killed at the stop) and ignores every
chain variable. Its loop is nanoGPT's: save at the top when ``iter_num`` is
a multiple of ``eval_interval`` (above 0), one step, print, ``iter_num +=
1``, stop once it is above ``max_iters``; so its last checkpoint holds
``max_iters``. The "loss" is a function of the iteration.

Configuration as nanoGPT's configurator: ``--key=value`` for a known key.
"""

import json
import os
import sys
import time
from typing import Any

out_dir = "out"
init_from = "scratch"  # or "resume"
max_iters = 120  # a multiple of eval_interval: the last checkpoint holds it
eval_interval = 10  # a checkpoint every this many iterations
iter_time = 0.1  # seconds of "compute" per iteration
ckpt_format = "json"  # or "torch"

for arg in sys.argv[1:]:
    key, sep, value = arg.removeprefix("--").partition("=")
    if not arg.startswith("--") or not sep or key not in globals() or key.startswith("_"):
        raise ValueError(f"Unknown config key: {arg}")
    globals()[key] = type(globals()[key])(value)


def loss_at(iteration: int) -> float:
    return 10.0 / (1 + iteration) + 0.5


def ckpt_path() -> str:
    return os.path.join(out_dir, "ckpt.pt" if ckpt_format == "torch" else "ckpt.json")


def save(iteration: int) -> None:
    state: dict[str, Any] = {
        "iter_num": iteration,
        "best_val_loss": loss_at(iteration),
        "config": {"max_iters": max_iters},
    }
    print(f"saving checkpoint to {out_dir}")
    if ckpt_format == "torch":
        import torch

        state["model"] = {"w": torch.full((4,), float(iteration))}
        torch.save(state, ckpt_path())
    else:
        with open(ckpt_path(), "w") as fh:  # non-atomic, as torch.save(checkpoint, path) is
            json.dump(state, fh)


def load() -> dict[str, Any]:
    if ckpt_format == "torch":
        import torch

        loaded: dict[str, Any] = torch.load(ckpt_path(), map_location="cpu")  # no file: FileNotFoundError
        return loaded
    with open(ckpt_path()) as fh:
        state: dict[str, Any] = json.load(fh)
        return state


if init_from == "scratch":
    print("Initializing a new model from scratch")
    iter_num = 0
elif init_from == "resume":
    print(f"Resuming training from {out_dir}")
    iter_num = int(load()["iter_num"])
else:
    raise ValueError(f"init_from={init_from!r}")
os.makedirs(out_dir, exist_ok=True)

while True:
    if iter_num % eval_interval == 0 and iter_num > 0:
        print(f"step {iter_num}: train loss {loss_at(iter_num):.4f}, val loss {loss_at(iter_num):.4f}")
        save(iter_num)
    time.sleep(iter_time)  # forward, backward, optimizer step
    print(f"iter {iter_num}: loss {loss_at(iter_num):.4f}, time {iter_time * 1000:.2f}ms")
    iter_num += 1
    if iter_num > max_iters:
        break
