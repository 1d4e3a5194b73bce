"""``torch.distributed`` as :class:`chain.app.ranks.Ranks`: the collectives
the torch adapter's checkpoints and step boundaries need across ranks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from chain.app.ranks import SINGLE, Ranks

__all__ = ["torch_ranks"]


def torch_ranks() -> Ranks:
    """This process's :class:`Ranks` from ``torch.distributed`` once its
    process group is initialized (``init_process_group``), else one rank.
    The collectives run on the CPU with gloo and on this process's GPU with
    NCCL."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return SINGLE
    world = dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")

    def all_max(values: Sequence[int]) -> list[int]:
        tensor = torch.tensor(list(values), dtype=torch.int64, device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [int(v) for v in tensor.tolist()]

    def gather(obj: Any) -> list[Any]:
        found: list[Any] = [None] * world
        dist.all_gather_object(found, obj)
        return found

    return Ranks(dist.get_rank(), world, all_max, dist.barrier, gather)
