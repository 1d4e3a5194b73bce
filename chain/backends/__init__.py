"""Backends: one module per scheduler behind ``chain.backends.base.Backend``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from chain.backends.base import Backend, JobInfo, JobState
from chain.errors import BackendUnavailable

if TYPE_CHECKING:  # tenacity is imported only by the backends that retry
    from chain.core.retry import RetryPolicy

__all__ = ["Backend", "JobInfo", "JobState", "choose_backend", "make_backend"]

log = logging.getLogger(__name__)


def local_spool(chain_dir: Path) -> Path:
    return chain_dir / "local-jobs"


def make_backend(name: str, chain_dir: Path, retry: "RetryPolicy | None" = None) -> Backend:
    """The backend called ``name`` (slurm, local, pyslurm) for one chain;
    ``retry`` bounds the effort per request (default: ``RetryPolicy()``)."""
    if name == "slurm":
        from chain.backends.slurm.cli import SlurmCliBackend

        return SlurmCliBackend(retry=retry)
    if name == "local":
        from chain.backends.local.backend import LocalBackend

        scale = float(os.environ.get("CHAIN_LOCAL_TIME_SCALE", "1") or 1)
        return LocalBackend(local_spool(chain_dir), time_scale=scale)
    if name == "pyslurm":
        from chain.backends.slurm.pyslurm import PyslurmBackend

        return PyslurmBackend(retry=retry)
    raise BackendUnavailable(f"unknown backend {name!r} (auto, slurm, local or pyslurm)")


def choose_backend(requested: str, chain_dir: Path) -> tuple[str, str]:
    """Resolve ``auto``: (backend name, why).

    pyslurm when it imports and its release matches the running Slurm's and
    the controller answers; otherwise the Slurm CLI backend when sbatch is on
    PATH and the controller answers; otherwise the embedded local backend.
    The why says which and why (the skipped pyslurm's one-line reason too);
    the choice is logged.
    """
    if requested != "auto":
        return requested, f"--backend {requested}"
    from chain.backends.slurm.cli import SlurmCliBackend

    slurm_answers = SlurmCliBackend().available()
    try:
        from chain.backends.slurm.pyslurm import PyslurmBackend

        pyslurm_backend = PyslurmBackend()
    except BackendUnavailable as exc:
        skipped = str(getattr(exc, "detail", exc))
    else:
        if slurm_answers or pyslurm_backend.available():
            name, why = "pyslurm", (
                f"auto: pyslurm {pyslurm_backend.version} matches the running Slurm "
                f"{pyslurm_backend.slurm_version} and the controller answers")
            log.info("backend %s (%s)", name, why)
            return name, why
        skipped = "pyslurm imports but the Slurm controller does not answer"
    if slurm_answers:
        name = "slurm"
        why = f"auto: sbatch found and the Slurm controller answers (not pyslurm: {skipped})"
    else:
        name = "local"
        why = "auto: no answering Slurm controller here, using the embedded local backend"
    log.info("backend %s (%s)", name, why)
    return name, why
