"""Random-number and data-order state for exact resumes with torch: the
RNG states of Python, NumPy, torch and CUDA, and a sampler whose order
depends only on (seed, epoch) and that can restart an epoch mid-way."""

from __future__ import annotations

import importlib
import logging
import random
from collections.abc import Iterator, Mapping, Sized
from types import ModuleType
from typing import Any

import torch
from torch.utils.data import Sampler

__all__ = ["ResumableSampler", "rng_state", "set_rng_state"]

log = logging.getLogger("chain.app.torch")


# --------------------------------------------------------------------- RNG


def _numpy() -> ModuleType | None:
    try:
        return importlib.import_module("numpy")
    except ImportError:
        return None


def rng_state() -> dict[str, Any]:
    """The global RNG states of Python, NumPy (if installed), torch and CUDA
    (if available), as plain containers and CPU tensors: loadable with
    ``torch.load(weights_only=True)``."""
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
        "torch": torch.get_rng_state(),
    }
    np = _numpy()
    if np is not None:
        # The dict form, with the key as a list: a NumPy array would need
        # allowlisting under weights_only loading.
        st = np.random.get_state(legacy=False)
        state["numpy"] = {
            "bit_generator": st["bit_generator"],
            "key": st["state"]["key"].tolist(),
            "pos": int(st["state"]["pos"]),
            "has_gauss": int(st["has_gauss"]),
            "gauss": float(st["gauss"]),
        }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` captured.  CUDA states are restored when
    the same number of devices is visible, else skipped with a warning (a
    resume on other hardware cannot reproduce the GPU streams anyway)."""
    py = state["python"]
    random.setstate((int(py["version"]), tuple(py["internal"]), py["gauss_next"]))
    torch.set_rng_state(state["torch"].cpu())  # map_location may have moved it
    saved_np = state.get("numpy")
    np = _numpy()
    if saved_np is not None and np is not None:
        np.random.set_state(
            {
                "bit_generator": saved_np["bit_generator"],
                "state": {
                    "key": np.array(saved_np["key"], dtype=np.uint32),
                    "pos": saved_np["pos"],
                },
                "has_gauss": saved_np["has_gauss"],
                "gauss": saved_np["gauss"],
            }
        )
    cuda = state.get("cuda")
    if cuda:
        if torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
            torch.cuda.set_rng_state_all([t.cpu() for t in cuda])
        else:
            log.warning("checkpoint has %d CUDA RNG states; not restored on this host", len(cuda))


# -------------------------------------------------------------------- data


class ResumableSampler(Sampler[int]):
    """A shuffling sampler whose order is a function of ``(seed, epoch)`` and
    which can start an epoch part-way through: the data position of a resume.

    It draws from its own generator, never from the global torch RNG, so
    resuming does not depend on when the data loader was created.  Call
    :meth:`set_epoch` at each epoch (``TrainLoop`` and Lightning do);
    :meth:`resume_at` starts the given epoch after ``start`` samples (of
    this rank's share, with ``num_replicas`` ranks: distributed training).
    ``len()`` is always the full epoch, so progress bars and Lightning's
    batch counts stay those of an uninterrupted run.
    """

    def __init__(
        self, data_source: Sized | int, *, seed: int = 0, shuffle: bool = True, num_replicas: int = 1, rank: int = 0
    ) -> None:
        self.num_samples = data_source if isinstance(data_source, int) else len(data_source)
        self.seed = seed
        self.shuffle = shuffle
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not one of {num_replicas} replicas")
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch; a different epoch starts at its beginning."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.start = 0

    def resume_at(self, epoch: int, start: int) -> None:
        """Start ``epoch`` after its first ``start`` samples."""
        self.epoch, self.start = epoch, max(0, start)

    def order(self, epoch: int) -> list[int]:
        """This rank's share of ``epoch``'s permutation: the whole of it for
        one replica; with ``num_replicas`` ranks, as ``DistributedSampler``
        deals it (padded by repetition to a multiple of the ranks, then every
        ``num_replicas``-th index from ``rank``)."""
        if not self.shuffle:
            indices = list(range(self.num_samples))
        else:
            generator = torch.Generator()
            generator.manual_seed(self.seed + epoch)  # as DistributedSampler does
            indices = torch.randperm(self.num_samples, generator=generator).tolist()
        if self.num_replicas == 1:
            return indices
        total = len(self) * self.num_replicas
        padded = (indices * (total // max(1, len(indices)) + 1))[:total]
        return padded[self.rank :: self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.order(self.epoch)[self.start :])

    def __len__(self) -> int:
        """This rank's samples in an epoch (all of them for one replica)."""
        return (self.num_samples + self.num_replicas - 1) // self.num_replicas


# -------------------------------------------------------------- checkpoint
