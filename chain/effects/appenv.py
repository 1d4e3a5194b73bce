"""The environment an app (and a user hook) starts with.

A user who ran ``chain`` from a virtualenv without activating it (``.venv/bin/chain
submit ...``) still expects ``python3 app.py`` in the runner to import
``chain.app``: the job scripts run ``chain`` by the venv's absolute path, but the
app's ``python3`` is looked up on ``PATH``. So, when ``chain`` runs inside a
virtualenv and the ``venv_on_path`` setting is on (the default), the app gets
the environment ``source .venv/bin/activate`` would give it: the venv's ``bin``
first on ``PATH`` and ``VIRTUAL_ENV`` set. ``--no-venv-on-path`` leaves ``PATH``
as the job has it (after ``module load``), for apps that bring their own Python.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path


def venv_bin(executable: str, prefix: str, base_prefix: str) -> str | None:
    """The ``bin`` directory of the virtualenv this Python runs in, or None
    outside a virtualenv. Pure: the caller passes ``sys`` facts in."""
    if prefix == base_prefix or not executable:
        return None
    # not resolved: a venv's python is a symlink to the base interpreter
    return str(Path(executable).parent)


def app_environ(
    environ: Mapping[str, str],
    *,
    venv_on_path: bool,
    executable: str = sys.executable,
    prefix: str = sys.prefix,
    base_prefix: str = sys.base_prefix,
) -> dict[str, str]:
    """A copy of ``environ`` for the app: the venv activated when asked, and
    Python's output unbuffered unless the user set ``PYTHONUNBUFFERED``."""
    env = dict(environ)
    # an app killed at the stop (no signal handler) loses what its buffer held:
    # its last lines, often the ones that say how far it got
    env.setdefault("PYTHONUNBUFFERED", "1")
    bindir = venv_bin(executable, prefix, base_prefix) if venv_on_path else None
    if bindir is None:
        return env
    parts = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bindir]
    env["PATH"] = os.pathsep.join([bindir, *parts])
    env["VIRTUAL_ENV"] = prefix
    env.pop("PYTHONHOME", None)  # as activate does: it would point the venv's python elsewhere
    return env


RESUMING_VAR = "CHAIN_RESUMING"


def mark_resuming(env: dict[str, str], counter: int) -> dict[str, str]:
    """``CHAIN_RESUMING=1`` in ``env`` when the app has a checkpoint to resume
    from (the counter at the runner's start is above 0), removed otherwise,
    so a resume flag needs no wrapper:
    ``--app-cmd 'python train.py ${CHAIN_RESUMING:+--init_from=resume}'``.
    A counter file that holds 0 is no checkpoint: an app asked to resume
    from nothing (nanoGPT's ``--init_from=resume``) fails. Returns ``env``."""
    if counter > 0:
        env[RESUMING_VAR] = "1"
    else:  # not inherited from the shell that submitted the chain either
        env.pop(RESUMING_VAR, None)
    return env


APP_UMASK_VAR = "CHAIN_APP_UMASK"
_OCTAL = re.compile(r"[0-7]{1,4}")


def _remembered_umask(environ: Mapping[str, str]) -> int | None:
    """``CHAIN_APP_UMASK`` when it holds an octal umask (anything else is ignored)."""
    remembered = environ.get(APP_UMASK_VAR, "")
    return int(remembered, 8) & 0o777 if _OCTAL.fullmatch(remembered) else None


def private_umask(environ: dict[str, str] | os._Environ[str]) -> int:
    """Make every file ``chain`` creates private to its user (group and
    others lose all bits, whatever the umask was: under ``umask 000`` the
    chain directory was world-writable), remembering the user's umask in
    ``CHAIN_APP_UMASK`` for the app and the hooks. Returns the user's umask."""
    user = os.umask(0o077)
    os.umask(user | 0o077)
    remembered = _remembered_umask(environ)
    if remembered is not None:
        return remembered
    environ[APP_UMASK_VAR] = f"{user:03o}"
    return user


def app_umask(environ: Mapping[str, str]) -> int:
    """The user's umask for the app and the hooks (``private_umask``)."""
    remembered = _remembered_umask(environ)
    return 0o022 if remembered is None else remembered
