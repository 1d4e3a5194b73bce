"""The app's environment: the venv that runs chain is on its PATH, as if activated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chain.effects.appenv import app_environ, venv_bin

VENV = "/home/u/proj/.venv"


def test_venv_bin_is_the_unresolved_executables_directory() -> None:
    assert venv_bin(f"{VENV}/bin/python", VENV, "/usr") == f"{VENV}/bin"
    assert venv_bin("/usr/bin/python3", "/usr", "/usr") is None  # not a venv


def test_the_venv_comes_first_on_path_once() -> None:
    env = app_environ(
        {"PATH": f"/opt/mod/bin:{VENV}/bin:/usr/bin", "PYTHONHOME": "/x", "HOME": "/h"},
        venv_on_path=True,
        executable=f"{VENV}/bin/python",
        prefix=VENV,
        base_prefix="/usr",
    )
    assert env["PATH"] == f"{VENV}/bin:/opt/mod/bin:/usr/bin"
    assert env["VIRTUAL_ENV"] == VENV and "PYTHONHOME" not in env and env["HOME"] == "/h"


@pytest.mark.parametrize("on, prefix", [(False, VENV), (True, "/usr")])
def test_path_is_left_alone_when_off_or_outside_a_venv(on: bool, prefix: str) -> None:
    env = app_environ(
        {"PATH": "/opt/mod/bin:/usr/bin"},
        venv_on_path=on,
        executable=f"{prefix}/bin/python",
        prefix=prefix,
        base_prefix="/usr",
    )
    assert env == {"PATH": "/opt/mod/bin:/usr/bin", "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize(
    "given, expected", [({}, "1"), ({"PYTHONUNBUFFERED": ""}, ""), ({"PYTHONUNBUFFERED": "0"}, "0")]
)
def test_the_apps_python_is_unbuffered_unless_the_user_said(given: dict[str, str], expected: str) -> None:
    """An app killed at the stop leaves its last lines in the log;
    a user's own PYTHONUNBUFFERED, even empty, is theirs."""
    env = app_environ({"PATH": "/usr/bin", **given}, venv_on_path=False)
    assert env["PYTHONUNBUFFERED"] == expected


@pytest.mark.parametrize(
    "counter, environ, expected",
    [(5, {}, "1"), (1, {"CHAIN_RESUMING": "1"}, "1"), (0, {}, None), (0, {"CHAIN_RESUMING": "1"}, None)],
)
def test_chain_resuming_marks_a_checkpoint_to_resume_from(
    counter: int, environ: dict[str, str], expected: str | None
) -> None:
    from chain.effects.appenv import mark_resuming

    assert mark_resuming(dict(environ), counter).get("CHAIN_RESUMING") == expected


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the test suite runs from the project's venv")
def test_python3_on_the_apps_path_imports_chain_app(tmp_path: Path) -> None:
    """The real thing: with a PATH holding only system directories (no venv),
    the app's ``python3`` is the venv's and imports chain.app."""
    bare = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    env = app_environ(bare, venv_on_path=True)
    out = subprocess.run(
        ["bash", "-c", "python3 -c 'import chain.app, sys; print(sys.prefix)'"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == sys.prefix


@pytest.mark.parametrize(
    "value, expected", [("002", 0o002), ("0077", 0o077), ("9", 0o022), ("rwx", 0o022), ("", 0o022)]
)
def test_the_remembered_umask_is_read_strictly(value: str, expected: int) -> None:
    """One parser for CHAIN_APP_UMASK; a digit 8 or 9 no longer crashes int(..., 8)."""
    from chain.effects.appenv import app_umask

    assert app_umask({"CHAIN_APP_UMASK": value} if value else {}) == expected
