"""The rank wrapper runs a user's script as ``python script.py`` would and
records how the rank ended, whatever way it ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chain.jobs.launching import rank_wrapper


def _run(
    tmp_path: Path, body: str, *args: str, rank: str = "1", ranks_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(body)
    folder = ranks_dir if ranks_dir is not None else tmp_path / "ranks"
    if ranks_dir is None:
        folder.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANK", "WORLD_SIZE")}
    env.update(CHAIN_RANKS_DIR=str(folder), RANK=rank, WORLD_SIZE="2")
    return subprocess.run(
        [sys.executable, str(rank_wrapper()), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _record(tmp_path: Path, rank: int = 1) -> dict[str, object]:
    data: dict[str, object] = json.loads((tmp_path / "ranks" / f"rank-{rank}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("body", "code", "returncode"),
    [
        ("print('ok')\n", 0, 0),
        ("import sys\nsys.exit(99)\n", 99, 99),
        ("raise SystemExit(75)\n", 75, 75),
        ("import sys\nsys.exit('bad input')\n", 1, 1),
        ("import sys\nsys.exit(None)\n", 0, 0),
        ("raise RuntimeError('boom')\n", 1, 1),
        ("raise KeyboardInterrupt\n", 130, -2),  # python ends itself by SIGINT, as a shell reports: 130
    ],
)
def test_the_ranks_end_is_recorded_and_the_process_ends_the_same(
    tmp_path: Path, body: str, code: int, returncode: int
) -> None:
    done = _run(tmp_path, body, "train.py")
    assert done.returncode == returncode, done.stderr
    assert _record(tmp_path) == {"rank": 1, "world": 2, "exit_code": code, "host": _record(tmp_path)["host"]}
    if code == 1 and "boom" in body:
        assert "RuntimeError: boom" in done.stderr  # the traceback as python would print it


def test_the_script_runs_as_main_with_its_arguments_and_its_directory_first(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "helper.py").write_text("VALUE = 'from the script dir'\n")
    (sub / "t.py").write_text("import sys, helper\nprint(__name__, sys.argv, helper.VALUE, 'chain' in sys.modules)\n")
    done = _run(tmp_path, "", "sub/t.py", "--lr", "3e-4")
    assert done.stdout.strip() == "__main__ ['sub/t.py', '--lr', '3e-4'] from the script dir False", done.stderr


def test_a_module_runs_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("import sys\nprint(__name__, sys.argv[1:])\nsys.exit(99)\n")
    done = _run(tmp_path, "", "-m", "pkg.train", "x")
    assert (done.returncode, done.stdout.strip()) == (99, "__main__ ['x']"), done.stderr
    assert _record(tmp_path)["exit_code"] == 99


def test_an_unwritable_folder_is_said_and_changes_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, "import sys\nsys.exit(99)\n", "train.py", ranks_dir=tmp_path / "missing" / "deeper")
    assert done.returncode == 99
    assert "could not record rank 1's end" in done.stderr


def test_without_a_ranks_folder_it_only_runs_the_script(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('alone')\n")
    env = {k: v for k, v in os.environ.items() if k != "CHAIN_RANKS_DIR"}
    done = subprocess.run(
        [sys.executable, str(rank_wrapper()), "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "alone\n", "")
