"""Backends: one module per scheduler behind ``chain.backends.base.Backend``."""

from __future__ import annotations

import os
from pathlib import Path

from chain.backends.base import Backend, JobInfo, JobState
from chain.errors import BackendUnavailable

__all__ = ["Backend", "JobInfo", "JobState", "make_backend", "choose_backend"]


def local_spool(chain_dir: Path) -> Path:
    return chain_dir / "local-jobs"


def make_backend(name: str, chain_dir: Path) -> Backend:
    """The backend called ``name`` (slurm, local, pyslurm) for one chain."""
    if name == "slurm":
        from chain.backends.slurm_cli import SlurmCliBackend

        return SlurmCliBackend()
    if name == "local":
        from chain.backends.local import LocalBackend

        scale = float(os.environ.get("CHAIN_LOCAL_TIME_SCALE", "1") or 1)
        return LocalBackend(local_spool(chain_dir), time_scale=scale)
    if name == "pyslurm":
        from chain.backends.pyslurm_backend import PyslurmBackend

        return PyslurmBackend()
    raise BackendUnavailable(f"unknown backend {name!r} (auto, slurm, local or pyslurm)")


def choose_backend(requested: str, chain_dir: Path) -> tuple[str, str]:
    """Resolve ``auto``: (backend name, why) — Slurm when its clients are on
    PATH and the controller answers, otherwise the embedded local backend."""
    if requested != "auto":
        return requested, f"--backend {requested}"
    from chain.backends.slurm_cli import SlurmCliBackend

    if SlurmCliBackend().available():
        return "slurm", "auto: sbatch found and the Slurm controller answers"
    return "local", "auto: no answering Slurm controller here, using the embedded local backend"
