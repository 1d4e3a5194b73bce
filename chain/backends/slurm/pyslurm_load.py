"""Whether pyslurm can be used here: it imports, has the API the backend uses,
and its release is the running Slurm's.

pyslurm's version is Slurm's major release plus pyslurm's own patch level
("22.5.3" is for Slurm 22.05, "25.11.1" for 25.11): each release is compiled
against that Slurm's headers and links its libslurm, so it works with that
Slurm release only. The rule is therefore pyslurm's major.minor == the
running Slurm's major.minor, whatever the release. PyPI carries only 25.11.x;
for another Slurm, pyslurm's matching release tag is built from source
(``scripts/setup --pyslurm`` in chain's repository). Everywhere else
construction raises a one-line ``BackendUnavailable`` and ``--backend auto``
falls back to the command-line backend.

The backend uses the object API pyslurm introduced in 22.5 (``Job``,
``Jobs``, ``JobSubmitDescription``, ``RPCError``, ``db``); older pyslurm
releases only have the old API and are refused here, in one line.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from collections.abc import Callable
from types import ModuleType

from chain.errors import BackendUnavailable

HOW_TO_BUILD = (
    "PyPI's pyslurm is for Slurm 25.11 only; for another Slurm build pyslurm's "
    "matching release tag, as chain's scripts/setup --pyslurm does"
)
# The object API of pyslurm >= 22.5 that the backend calls.
REQUIRED_API = ("Job", "Jobs", "JobSubmitDescription", "RPCError")


def _major_minor(text: str) -> str | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    if match is None:
        return None
    return f"{int(match.group(1))}.{int(match.group(2)):02d}"


def pyslurm_release(slurm: str) -> str:
    """pyslurm's release name for a Slurm release: "22.05.8" -> "22.5"."""
    mm = _major_minor(slurm) or slurm
    major, _, minor = mm.partition(".")
    return f"{major}.{int(minor)}" if minor.isdigit() else mm


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
    needs = (
        f"pyslurm {pyslurm_release(slurm)}.x, built for this machine's Slurm {slurm}"
        if slurm
        else "a pyslurm built for the running Slurm's release"
    )
    return PyslurmUnavailable(
        f"the pyslurm backend needs {needs}; {detail} ({HOW_TO_BUILD}) — use --backend slurm",
        detail,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


def _import_pyslurm(slurm: str | None) -> ModuleType:
    try:
        module = importlib.import_module("pyslurm")
    except ImportError as exc:  # also a libslurm.so of another release
        if getattr(exc, "name", None) == "pyslurm":
            raise _unavailable(slurm, "pyslurm is not installed") from None
        raise _unavailable(slurm, f"pyslurm does not load ({_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - pyslurm's own import code (slurm_init) failed
        raise _unavailable(slurm, f"pyslurm does not load ({type(exc).__name__}: {_first_line(exc)})") from None
    lacking = [name for name in REQUIRED_API if not hasattr(module, name)]
    if lacking:
        version = str(getattr(module, "__version__", "?"))
        raise _unavailable(
            slurm,
            f"the installed pyslurm {version} predates the API chain uses "
            f"(no pyslurm.{lacking[0]}; pyslurm 22.5 or later has it)",
        )
    return module


def load_pyslurm(
    module: ModuleType | None = None,
    slurm_version: str | None = None,
) -> tuple[ModuleType, str, str]:
    """Import pyslurm and check it against the running Slurm.

    Returns (module, pyslurm version, Slurm version); raises a one-line
    ``BackendUnavailable`` when pyslurm is missing, fails to load its
    libslurm, lacks the object API, or was built for another Slurm release
    than the one running. A ``module`` given by a test is taken as it is.
    """
    slurm = slurm_version if slurm_version is not None else running_slurm_version()
    if module is None:
        if slurm is None:
            # Not even tried: importing pyslurm where libslurm finds no
            # configuration ends the whole process (libslurm's fatal()).
            raise _unavailable(slurm, "not tried: the Slurm clients found no configuration (sinfo --version failed)")
        module = _import_pyslurm(slurm)
    version = str(getattr(module, "__version__", "") or "")
    if not version and callable(getattr(module, "version", None)):
        version = str(module.version())
    ours = _major_minor(version)
    if ours is None:
        raise _unavailable(slurm, f"cannot tell the installed pyslurm's version ({version!r})")
    if slurm is None:
        raise _unavailable(
            slurm, f"pyslurm {version} is installed but the running Slurm's version is unknown (sinfo --version failed)"
        )
    if _major_minor(slurm) != ours:
        raise _unavailable(slurm, f"the installed pyslurm {version} is for Slurm {ours}")
    return module, version, slurm
