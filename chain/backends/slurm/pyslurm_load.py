"""Whether pyslurm can be used here: it imports, and its release is the running Slurm's.

pyslurm's version is Slurm's major release plus pyslurm's own patch level
(25.11.x works with any Slurm 25.11.x, and only with it: it is compiled
against that release's headers and links its libslurm). PyPI's wheels are
built for 25.11, so the pyslurm backend is used only where pyslurm imports *and* its
major.minor equals the running Slurm's; everywhere else construction raises
a one-line ``BackendUnavailable`` and ``--backend auto`` falls back to the
command-line backend.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from collections.abc import Callable
from types import ModuleType

from chain.errors import BackendUnavailable

PYSLURM_EXTRA = "pip install 'slurm-chain[pyslurm]'"
SUPPORTED = "25.11"  # the release PyPI's pyslurm (the extra's pin) is built for


def _major_minor(text: str) -> str | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    if match is None:
        return None
    return f"{int(match.group(1))}.{int(match.group(2)):02d}"


def running_slurm_version(
    run: Callable[[list[str]], str | None] | None = None,
) -> str | None:
    """The running Slurm's version as its clients print it ("22.05.8"), or None.

    ``sinfo --version`` prints ``slurm 22.05.8`` (``slurm-wlm`` on Debian);
    it needs a configuration source (slurm.conf or DNS SRV) even for
    ``--version``, so a machine without one answers None.
    """
    runner = run or _run_version
    for argv in (["sinfo", "--version"], ["scontrol", "--version"]):
        out = runner(argv)
        if out:
            match = re.search(r"(\d+\.\d+(?:\.\d+)?)", out)
            if match:
                return match.group(1)
    return None


def _run_version(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


class PyslurmUnavailable(BackendUnavailable):
    """pyslurm cannot be used here; ``detail`` is the short reason."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def _unavailable(slurm: str | None, detail: str) -> PyslurmUnavailable:
    here = f"this machine has Slurm {slurm}" if slurm else "no running Slurm answered here"
    return PyslurmUnavailable(
        f"the pyslurm backend needs pyslurm {SUPPORTED} built against Slurm {SUPPORTED} "
        f"({PYSLURM_EXTRA}); {detail}; {here} — use --backend slurm",
        f"{detail}; {here}",
    )


def load_pyslurm(
    module: ModuleType | None = None, slurm_version: str | None = None,
) -> tuple[ModuleType, str, str]:
    """Import pyslurm and check it against the running Slurm.

    Returns (module, pyslurm version, Slurm version); raises a one-line
    ``BackendUnavailable`` when pyslurm is missing, fails to load its
    libslurm, or was built for another Slurm release than the one running.
    """
    slurm = slurm_version if slurm_version is not None else running_slurm_version()
    if module is None:
        try:
            module = importlib.import_module("pyslurm")
        except ImportError as exc:  # also a libslurm.so of another release
            missing = getattr(exc, "name", None) == "pyslurm"
            detail = "pyslurm is not installed" if missing else (
                f"pyslurm does not load ({str(exc).splitlines()[0] if str(exc) else exc!r})")
            raise _unavailable(slurm, detail) from None
        except OSError as exc:
            raise _unavailable(slurm, f"pyslurm does not load ({exc})") from None
    version = str(getattr(module, "__version__", "") or "")
    if not version and callable(getattr(module, "version", None)):
        version = str(module.version())
    ours = _major_minor(version)
    if ours is None:
        raise _unavailable(slurm, f"cannot tell the installed pyslurm's version ({version!r})")
    if slurm is None:
        raise _unavailable(slurm, f"pyslurm {version} is installed but the running Slurm's "
                                  "version is unknown (sinfo --version failed)")
    if _major_minor(slurm) != ours:
        raise _unavailable(slurm, f"the installed pyslurm {version} is for Slurm {ours}")
    return module, version, slurm
