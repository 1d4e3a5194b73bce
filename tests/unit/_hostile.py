"""Driving the CLI with hostile files: one helper for the
tests of the guarded chain directory, the bounded readers and cancel."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from chain.cli.commands import app

ENV_CLEARED = ("MAX_ITER", "APP_CMD", "RUNNER_TIME_LIMIT", "RUNNER_MARGIN_SEC", "LAUNCH_MODE", "CHAIN_DIR", "CKPT_PATH")


def run_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: Sequence[str], env: Mapping[str, str] | None = None
) -> Result:
    """``chain ARGV`` in ``tmp_path`` on the local backend, as cli/test_commands_bad_input.py runs it."""
    monkeypatch.chdir(tmp_path)
    for var in ENV_CLEARED:
        monkeypatch.delenv(var, raising=False)
    return CliRunner().invoke(app, list(argv), env={"CHAIN_BACKEND": "local", **(env or {})})


def assert_refused(result: Result, fragment: str, code: int = 2) -> None:
    """One line ``chain: error: ...`` holding ``fragment``, exit ``code``, no traceback."""
    err = result.stderr
    assert result.exit_code == code, (result.exit_code, err, result.stdout)
    assert err.startswith("chain: error: ") and err.count("\n") == 1, err
    assert fragment in err, err
    assert "Traceback" not in err + result.stdout


def edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def replace_text(path: Path, old: str, new: str) -> None:
    """Put ``new`` for ``old`` in a JSON file's text (a value json.dumps could not write)."""
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new))


def fifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def link(path: Path, target: str | Path) -> Path:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    path.unlink(missing_ok=True)
    os.symlink(target, path)
    return path


def victim(tmp_path: Path, name: str = "victim") -> Path:
    """A file outside the chain directory that nothing may write."""
    path = tmp_path / name
    path.write_text("precious\n")
    return path


@contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """``directory`` immutable (root: chattr +i, as an admin would) or read-only (a user)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(directory)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
    else:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
