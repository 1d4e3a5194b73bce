"""Backends: one module per scheduler behind ``chain.backends.base.Backend``.

``BACKENDS`` is the registry (name -> factory); ``make_backend`` builds one by
name, ``choose_backend`` resolves ``auto``. Each factory imports its backend
only when called: a chain on one backend never loads another's code.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from chain.backends.base import Backend, JobInfo, JobState
from chain.core.retry import RetryPolicy
from chain.errors import BackendUnavailable

__all__ = ["BACKENDS", "Backend", "JobInfo", "JobState", "choose_backend", "make_backend", "slurm_installed"]

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


def slurm_installed() -> list[str]:
    """Slurm's clients found on this machine: ``sbatch`` on PATH, ``pyslurm``
    installed. pyslurm is looked up, never imported: importing it where
    libslurm finds no configuration ends the process (``pyslurm_load``)."""
    import shutil  # here: shutil loads compression modules no job needs

    found = ["sbatch on PATH"] if shutil.which("sbatch") else []
    try:
        if importlib.util.find_spec("pyslurm") is not None:
            found.append("pyslurm installed")
    except (ImportError, ValueError):  # a finder that refuses it, a broken stub
        pass
    return found


def choose_backend(requested: str) -> tuple[str, str]:
    """Resolve ``auto``: (backend name, why).

    pyslurm when it imports and its release matches the running Slurm's and
    the controller answers; otherwise the Slurm CLI backend when sbatch is on
    PATH and the controller answers; the embedded local backend only where
    no Slurm client is installed at all. Where Slurm is installed and its
    controller does not answer, a one-line ``BackendUnavailable``: a chain
    of hundreds of hours must never start on a login node by accident.
    The why says which and why (the skipped pyslurm's one-line reason too);
    the caller logs it (``chain.log``).
    """
    if requested != "auto":
        return requested, f"--backend {requested}"
    installed = slurm_installed()
    if not installed:
        return "local", "auto: no Slurm here (no sbatch on PATH, no pyslurm), using the embedded local backend"
    from chain.backends.slurm.cli import SlurmCliBackend

    slurm_answers = SlurmCliBackend().available()
    try:
        from chain.backends.slurm.pyslurm import PyslurmBackend

        pyslurm_backend = PyslurmBackend()
    except BackendUnavailable as exc:
        skipped = str(getattr(exc, "detail", exc))
    else:
        if slurm_answers or pyslurm_backend.available():
            name, why = (
                "pyslurm",
                (
                    f"auto: pyslurm {pyslurm_backend.version} matches the running Slurm "
                    f"{pyslurm_backend.slurm_version} and the controller answers"
                ),
            )
            return name, why
        skipped = "pyslurm imports but the Slurm controller does not answer"
    if slurm_answers:
        return "slurm", f"auto: sbatch found and the Slurm controller answers (not pyslurm: {skipped})"
    raise BackendUnavailable(
        f"--backend auto: Slurm is installed here ({', '.join(installed)}) but its controller did not "
        "answer (sinfo says why; is SLURM_CONF set?): not running the chain on this machine by accident; "
        "--backend local runs it on this machine"
    )
