"""``torch.distributed`` as :class:`chain.app.ranks.Ranks`: the collectives
the torch adapter's checkpoints and step boundaries need across ranks; and a
DDP gradient reduction whose sums do not depend on DDP's bucket layout, so a
resumed run of more than two ranks can end bit-identical to an uninterrupted one."""

from collections.abc import Sequence
from typing import Any, cast

import torch
from torch._C._distributed_c10d import GradBucket  # what torch.distributed.GradBucket is

from chain.app.ranks import SINGLE, Ranks

__all__ = ["rank_order_mean", "torch_ranks"]


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


# No `from __future__ import annotations` here: DDP checks this hook's annotations as
# objects (the bucket's must be the GradBucket class itself, not its name).
def rank_order_mean(state: object, bucket: GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A DDP communication hook: each gradient the mean over ranks, summed in
    rank order, whatever DDP's bucket layout.

    DDP rebuilds its gradient buckets after its first step, so a process that
    resumes from a checkpoint reduces its first step's gradients in other
    buckets than an uninterrupted process did at that step. The default
    all-reduce adds the ranks' values in an order that follows the bucket's
    layout: with three ranks or more, the sums differ in the last bit and the
    resumed run drifts from the uninterrupted one. This hook gathers every
    rank's bucket and adds them as rank 0 + rank 1 + ..., element by element,
    the same order for every layout. It moves ``world`` times a bucket
    (all-gather, not all-reduce): for exact resumes and their checks, not for
    throughput. Register it once the model is wrapped, on every rank::

        ddp = DistributedDataParallel(model)
        ddp.register_comm_hook(None, rank_order_mean)
    """
    group = state if isinstance(state, torch.distributed.ProcessGroup) else None
    dist = torch.distributed
    world = dist.get_world_size(group)
    tensor = bucket.buffer()
    gathered = [torch.empty_like(tensor) for _ in range(world)]
    work = dist.all_gather(gathered, tensor, group=group, async_op=True)
    assert work is not None  # async_op=True always gives the work

    def mean(_: torch.futures.Future[Any]) -> torch.Tensor:
        total = gathered[0].clone()
        for part in gathered[1:]:
            total.add_(part)  # one element at a time, rank order: no reordering by layout
        return total.div_(world)

    return cast(torch.futures.Future[torch.Tensor], work.get_future().then(mean))
