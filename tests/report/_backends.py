"""Backends for the report tests: the Slurm CLI backend answering from a
stand-in for the sacct subprocess (``run(argv) -> CompletedProcess``), and
a ``make_report`` backend factory built on it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from chain.backends import make_backend
from chain.backends.base import Backend
from chain.backends.slurm.cli import SlurmCliBackend
from chain.core.retry import RetryPolicy

Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def slurm_backend(run: Run, retry: RetryPolicy | None = None) -> SlurmCliBackend:
    """The Slurm CLI backend whose every client call is ``run(argv)``; no retry really sleeps."""

    def client(
        argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None
    ) -> subprocess.CompletedProcess[str]:
        return run(argv)

    return SlurmCliBackend(retry=retry or RetryPolicy(sleep=lambda s: None), run=client)


def backends(run: Run) -> Callable[[str, Path], Backend]:
    """``make_report``'s factory: a chain stored as "slurm" gets ``slurm_backend(run)``,
    any other its real backend (the local one reads its own spool)."""

    def make(name: str, chain_dir: Path) -> Backend:
        return slurm_backend(run) if name == "slurm" else make_backend(name, chain_dir)

    return make
