"""Docs whose every Python snippet runs, or at least names only what exists.

Every Python block of README.md and docs/ carries a mark, an HTML comment on
the line before its fence, saying how it is tested:

* ``<!-- test: app -->``: a complete app. It is run as a runner runs it (the
  contract's environment), stopped with SIGTERM once it has saved (it must
  exit 99 with its counter advanced), then started again with a higher
  ``MAX_ITER`` (it must resume and exit 0 with the counter there);
* ``<!-- test: run -->``: run as written, in an empty directory (it uses the
  local backend);
* ``<!-- test: check NAME ... -->``: compiled and its names checked; the NAMEs
  are the ones the reader brings (``model``), if any.

An unmarked Python block fails here, so a new snippet has to choose; Python
in an indented block fails too. Every Python and YAML block's ``chain``
names are imported and checked, with the keywords it passes
(``namecheck.py``).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import snippets as sn
from snippets import REPO, Block

PY_MARKS = ("app", "run", "check")
USER_ENV_DROP = ("CHAIN_", "SLURM_")
CONTRACT_VARS = ("MAX_ITER", "CKPT_PATH", "CHECKPOINT_EVERY", "APP_CMD")


def _python_blocks() -> list[Block]:
    return [b for page in sn.doc_pages() for b in sn.blocks(page) if b.lang == "python"]


def _with_mark(mark: str) -> list[object]:
    """The Python blocks with this mark, named by page and place among the page's Python blocks."""
    params = []
    for page in sn.doc_pages():
        for n, block in enumerate(b for b in sn.blocks(page) if b.lang == "python"):
            if block.marks[:1] == (mark,):
                params.append(pytest.param(block, id=f"{page.name}-python-{n}"))
    return params


def _child_env(**extra: str) -> dict[str, str]:
    """The environment of a reader's shell: no chain or Slurm variables of the
    test's own, this checkout's Python first on PATH, nothing from the network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(USER_ENV_DROP) and k not in CONTRACT_VARS}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONUNBUFFERED="1",
        CHAIN_PODINFO="/nonexistent-podinfo",  # never the machine's own termination warnings
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env


def _readers_names(block: Block) -> list[str]:
    """The names a ``check`` block's mark says the reader brings."""
    return list(block.marks[1:]) if block.marks[:1] == ("check",) else []


def _looks_like_python(text: str) -> bool:
    """An indented block that is Python (it compiles, and calls or assigns):
    Python belongs in a fenced, marked block."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(node, (ast.Call, ast.Assign, ast.Import, ast.ImportFrom)) for node in ast.walk(tree))


def test_every_python_block_is_marked() -> None:
    unmarked = [b.where for b in _python_blocks() if b.marks[:1] not in [(m,) for m in PY_MARKS]]
    assert not unmarked, (
        "Python blocks without a <!-- test: app|run|check --> mark on the line before the fence: "
        f"{unmarked} (see tests/docs/test_python_snippets.py)"
    )
    indented = [b.where for p in sn.doc_pages() for b in sn.blocks(p) if not b.fenced and _looks_like_python(b.text)]
    assert not indented, f"Python in indented blocks (make each a fenced ```python block with a mark): {indented}"


def test_marks_are_found() -> None:
    page = REPO / "README.md"
    marked = [b for b in sn.blocks(page) if b.lang == "python"]
    assert marked and marked[0].marks == ("app",), marked


def test_python_and_yaml_names_resolve() -> None:
    """Every name a Python block uses is defined in it (or brought by the
    reader, as its mark says), and every ``chain`` name it or a YAML block
    takes exists, with the keywords it passes. In a child process: the
    checks import chain.app.torch and chain.app.lightning."""
    found = [b for page in sn.doc_pages() for b in sn.blocks(page) if b.lang in ("python", "yaml")]
    payload = [{"where": b.where, "lang": b.lang, "code": b.text, "allowed": _readers_names(b)} for b in found]
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("namecheck.py"))],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=_child_env(PYTHONPATH=str(REPO)),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems = json.loads(proc.stdout)
    assert not problems, "\n".join(problems)
    assert sum(b.lang == "python" for b in found) >= 8


def test_namecheck_finds_what_rots(tmp_path: Path) -> None:
    """The checker itself: an undefined name, a missing import, a wrong
    keyword, a setting that does not exist."""
    code = (
        "from chain import Chain\nfrom chain.app import AppEnv, Gone\nfrom chain.app.stop import StopMonitor\n"
        "env = AppEnv.from_environ()\nprint(env.ckpt_path, env.nowhere, model)\n"
        "StopMonitor().stop_expected()\nChain.submit('x', app_cmd='a', max_iters=5)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("namecheck.py"))],
        input=json.dumps([{"where": "t", "lang": "python", "code": code}]),
        capture_output=True,
        text=True,
        env=_child_env(PYTHONPATH=str(REPO)),
        timeout=120,
        check=False,
    )
    text = "\n".join(json.loads(proc.stdout))
    for expected in ("'model' is used but never defined", "no 'Gone'", "no 'nowhere'", "'lead_seconds'", "'max_iters'"):
        assert expected in text, text


def _counter(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


@pytest.mark.parametrize("block", _with_mark("app"))
def test_app_blocks_follow_the_contract(block: Block, tmp_path: Path) -> None:
    """A complete app of the docs as a runner starts it: stopped with SIGTERM
    once it has saved, it exits 99 with its counter advanced; started again,
    it resumes and exits 0 at MAX_ITER with the counter there."""
    (tmp_path / "app.py").write_text(block.text, encoding="utf-8")
    env = _child_env(CKPT_PATH="counter.txt", CHECKPOINT_EVERY="2", CHAIN_STOP_SIGNAL="TERM")
    counter = tmp_path / "counter.txt"
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "app.py"], cwd=tmp_path, env=dict(env, MAX_ITER="100000"), stdout=log, stderr=log
        )
        try:
            give_up = time.monotonic() + 180
            while not _counter(counter):
                assert proc.poll() is None, f"{block.where} ended before its first save"
                assert time.monotonic() < give_up, f"{block.where} wrote no counter in 180 s"
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
        finally:
            proc.kill()
    saved = _counter(counter)
    log_text = (tmp_path / "first.log").read_text()[-3000:]
    assert code == 99 and saved is not None and 1 <= saved < 100000, f"{block.where}: exit {code}\n{log_text}"
    again = subprocess.run(
        [sys.executable, "app.py"],
        cwd=tmp_path,
        env=dict(env, MAX_ITER=str(saved + 3)),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert again.returncode == 0, f"{block.where}: resumed run exited {again.returncode}\n{again.stderr[-3000:]}"
    assert _counter(counter) == saved + 3


@pytest.mark.parametrize("block", _with_mark("run"))
def test_run_blocks_run(block: Block, tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(block.text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=tmp_path,
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    output = f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{output}"
