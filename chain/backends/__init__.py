"""Backends: one module per scheduler behind ``chain.backends.base.Backend``.

``BACKENDS`` is the registry (name -> factory); ``make_backend`` builds one by
name, ``choose_backend`` resolves ``auto``. Each factory imports its backend
only when called: a chain on one backend never loads another's code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from chain.backends.base import Backend, JobInfo, JobState
from chain.core.retry import RetryPolicy
from chain.errors import BackendUnavailable

__all__ = ["BACKENDS", "Backend", "JobInfo", "JobState", "choose_backend", "make_backend"]

# A backend for one chain (its directory), bounded by a retry policy (None:
# the backend's default) where the backend retries at all.
BackendFactory = Callable[[Path, RetryPolicy | None], Backend]


def local_spool(chain_dir: Path) -> Path:
    return chain_dir / "local-jobs"


def _slurm(chain_dir: Path, retry: RetryPolicy | None) -> Backend:
    from chain.backends.slurm.cli import SlurmCliBackend

    return SlurmCliBackend(retry=retry)


def _local(chain_dir: Path, retry: RetryPolicy | None) -> Backend:
    from chain.backends.local.backend import LocalBackend

    # time scale and kill wait from the environment (CHAIN_LOCAL_*), validated there
    return LocalBackend(local_spool(chain_dir))


def _pyslurm(chain_dir: Path, retry: RetryPolicy | None) -> Backend:
    from chain.backends.slurm.pyslurm import PyslurmBackend

    return PyslurmBackend(retry=retry)


BACKENDS: dict[str, BackendFactory] = {"slurm": _slurm, "local": _local, "pyslurm": _pyslurm}


def make_backend(name: str, chain_dir: Path, retry: RetryPolicy | None = None) -> Backend:
    """The backend called ``name`` (a key of ``BACKENDS``) for one chain;
    ``retry`` bounds the effort per request (default: ``RetryPolicy()``)."""
    factory = BACKENDS.get(name)
    if factory is None:
        *names, last = ["auto", *BACKENDS]
        raise BackendUnavailable(f"unknown backend {name!r} ({', '.join(names)} or {last})")
    return factory(chain_dir, retry)


def choose_backend(requested: str) -> tuple[str, str]:
    """Resolve ``auto``: (backend name, why).

    pyslurm when it imports and its release matches the running Slurm's and
    the controller answers; otherwise the Slurm CLI backend when sbatch is on
    PATH and the controller answers; otherwise the embedded local backend.
    The why says which and why (the skipped pyslurm's one-line reason too);
    the caller logs it (``chain.log``). ``chain_dir`` is not used (kept for callers that
    still pass it).
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
            return name, why
        skipped = "pyslurm imports but the Slurm controller does not answer"
    if slurm_answers:
        name = "slurm"
        why = f"auto: sbatch found and the Slurm controller answers (not pyslurm: {skipped})"
    else:
        name = "local"
        why = "auto: no answering Slurm controller here, using the embedded local backend"
    return name, why
