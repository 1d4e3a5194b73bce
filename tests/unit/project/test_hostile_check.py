"""scripts/hostile-check, the hostile acceptance run against the
command line: the whole run takes about 50 s (docs/development.md), so CI
runs the part that can hurt the caller, the killpg-bait local job records
(batch_pid 0 and -1, supervisor_pid 0, a stranger's pid with another start
time, through ``chain status`` and ``chain cancel``), the report over a FIFO
or a ``/dev/zero`` link as the app's iteration log, and the script's own
judgement of a mishandled case."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "hostile-check"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.local
def test_no_bait_job_record_makes_chain_signal_what_it_did_not_start() -> None:
    proc = _run("-k", "pid")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    cases = [line for line in lines if line.startswith(("OK", "MISHANDLED"))]
    assert len(cases) == 9 and all(line.startswith("OK ") for line in cases), lines
    assert lines[-1].startswith("hostile-check: 0 mishandled"), lines


def _script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))  # it imports its cases beside it
    try:
        loader = importlib.machinery.SourceFileLoader("hostile_check", str(SCRIPT))
        spec = importlib.util.spec_from_loader(loader.name, loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


@pytest.mark.parametrize(
    ("code", "stderr", "why"),
    [
        (2, "chain: error: state.json is not a regular file\n", ""),
        (70, "chain: internal error\n", "exit 70 (allowed [2])"),
        (2, "Traceback (most recent call last):\nRecursionError: deep\n", "traceback: RecursionError: deep"),
        (2, "chain: error: one\nand two\n", "exit 2 with 2 lines on stderr"),
        (-9, "", "killed by signal 9"),
    ],
)
def test_the_script_judges_what_the_command_did(tmp_path: Path, code: int, stderr: str, why: str) -> None:
    script = _script()
    spec = script.Case("a case", ["status"])
    (tmp_path / "outside").mkdir()
    before = script._snapshot(tmp_path)
    done = subprocess.CompletedProcess(["chain"], code, b"", stderr.encode())
    assert script._judge(spec, tmp_path, done, before).startswith(why)
    if not why:  # and a write outside the chain directory is one too
        (tmp_path / "outside" / "victim").write_text("changed")
        assert script._judge(spec, tmp_path, done, before) == "wrote outside the chain directory: outside/victim"


@pytest.mark.local
def test_the_report_says_an_iteration_log_it_did_not_read() -> None:
    proc = _run("-k", "iterations.log")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    cases = [line for line in lines if line.startswith(("OK", "MISHANDLED"))]
    assert len(cases) == 2 and all(line.startswith("OK ") for line in cases), lines
