"""Security checks across the tree: nothing the chain reads is evaluated, sourced or
unpickled; corrupt or ill-typed state gives one line of error; the chain's
files respect the umask and none is world-writable."""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
CHAIN = REPO / "chain"
# chain/app is the app's side: a user's choice of serializer is the user's.
ENGINE = [p for p in CHAIN.rglob("*.py") if CHAIN / "app" not in p.parents]
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "cloudpickle", "joblib"}


# The one module allowed to import pickle: it reads a torch.save counter with an
# Unpickler whose find_class imports nothing (every class it names is an inert stand-in);
# test_the_one_unpickler_imports_nothing and tests/unit/store/test_torch_counter.py hold it to that.
INERT_UNPICKLING = {(CHAIN / "store" / "torch_counter.py", "pickle")}


def test_the_one_unpickler_imports_nothing() -> None:
    (path, _), *_ = INERT_UNPICKLING
    tree = ast.parse(path.read_text(encoding="utf-8"))
    unpicklers = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "pickle.Unpickler" for b in node.bases)
    ]
    assert len(unpicklers) == 1
    methods = {f.name: f for f in unpicklers[0].body if isinstance(f, ast.FunctionDef)}
    assert {"find_class", "persistent_load"} <= set(methods)
    # find_class returns names it holds, never one it looks up (no import, getattr or sys.modules)
    looked_up = [n for n in ast.walk(methods["find_class"]) if isinstance(n, (ast.Call, ast.Subscript))]
    assert looked_up == [], [ast.unparse(n) for n in looked_up]
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and ast.unparse(n).startswith("pickle.")]
    assert {ast.unparse(n) for n in uses} == {"pickle.Unpickler"}  # never pickle.load(s) itself


def test_engine_never_evaluates_or_unpickles() -> None:
    assert len(ENGINE) > 20
    found = []
    for path in ENGINE:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                if name in FORBIDDEN_CALLS and (isinstance(fn, ast.Name) or getattr(fn.value, "id", "") == "builtins"):  # type: ignore[attr-defined]
                    found.append(f"{where}: {name}()")
                if name == "load" and isinstance(fn, ast.Attribute) and getattr(fn.value, "id", "") == "yaml":
                    found.append(f"{where}: yaml.load")
                for kw in node.keywords:
                    if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        found.append(f"{where}: shell=...")
                if name == "system" and getattr(fn, "value", None) is not None and getattr(fn.value, "id", "") == "os":  # type: ignore[attr-defined]
                    found.append(f"{where}: os.system")
            elif isinstance(node, ast.Import):
                found += [
                    f"{where}: import {a.name}"
                    for a in node.names
                    if a.name.split(".")[0] in FORBIDDEN_MODULES and (path, a.name) not in INERT_UNPICKLING
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{where}: from {node.module} import")
    assert not found, found


def test_job_scripts_source_nothing_of_the_chain() -> None:
    """The rendered job scripts may source the module system's init (a system
    file), never anything in the chain or working directory."""
    for template in (REPO / "templates").glob("*.j2"):
        for line in template.read_text().splitlines():
            words = line.strip().split()
            if words[:1] in (["source"], ["."]) or " source " in line:
                assert words[1:2] == ['"$init";'], f"{template.name}: {line.strip()}"


def _chain(*args: str, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    def preexec() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        [sys.executable, "-m", "chain", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=preexec,
        env={**os.environ, "CHAIN_BACKEND": "local"},
    )


def _good_state(tmp_path: Path) -> dict[str, Any]:
    return {
        "chain_id": "chain-abc123",
        "state": "stopped",
        "reason": "x",
        "workdir": str(tmp_path),
        "backend": "local",
        "runner_seq": 1,
        "hooks": [],
    }


CORRUPT = {
    "not json": '{"chain_id": ',
    "empty": "",
    "a list": "[1, 2]",
    "no chain_id": json.dumps({"state": "running"}),
    "chain_id int": json.dumps({"chain_id": 5}),
    "bad state": json.dumps({"chain_id": "c", "state": "exploded"}),
    "runner_seq str": "RUNNER_SEQ",
    "runner_live str": "RUNNER_LIVE",
    "hooks str": "HOOKS_STR",
    "hooks of ints": "HOOKS_INTS",
    "binary": b"\xff\xfe\x00garbage".decode("latin-1"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
@pytest.mark.parametrize("command", [("status",), ("status", "--json"), ("submit", "--resume"), ("cancel",)])
def test_corrupt_state_gives_one_line_error(tmp_path: Path, case: str, command: tuple[str, ...]) -> None:
    chain_dir = tmp_path / ".chain"
    chain_dir.mkdir()
    (chain_dir / "settings.json").write_text(json.dumps({}))
    text = CORRUPT[case]
    good = _good_state(tmp_path)
    mutations: dict[str, dict[str, Any]] = {
        "RUNNER_SEQ": {"runner_seq": "3"},
        "RUNNER_LIVE": {"runner_live": "yes"},
        "HOOKS_STR": {"hooks": "report"},
        "HOOKS_INTS": {"hooks": [1, 2]},
    }
    if text in mutations:
        text = json.dumps({**good, **mutations[text]})
    (chain_dir / "state.json").write_text(text, encoding="latin-1")
    proc = _chain(*command, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chain: error: "), proc.stderr
    assert "state" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.local
@pytest.mark.parametrize("umask", [0o077, 0o022])
def test_chain_files_respect_the_umask(tmp_path: Path, umask: int) -> None:
    """A short chain on the local backend under the umask: every file and
    directory it creates keeps within the umask, none is world-writable."""
    app = "python3 -c \"import os; open(os.environ['CKPT_PATH'], 'w').write(os.environ['MAX_ITER'])\""
    proc = _chain("submit", "--backend", "local", "--max-iter", "3", "--app-cmd", app, cwd=tmp_path, umask=umask)
    assert proc.returncode == 0, proc.stderr
    deadline = time.time() + 90
    while True:
        report = json.loads(_chain("status", "--json", cwd=tmp_path, umask=umask).stdout)
        if report["state"] in ("completed", "failed", "stopped", "cancelled"):
            break
        assert time.time() < deadline, report
        time.sleep(0.3)
    assert report["state"] == "completed", report
    time.sleep(1)  # the local supervisor's last writes
    allowed = 0o777 & ~umask
    checked, bad = 0, []
    for path in [tmp_path / ".chain", *sorted((tmp_path / ".chain").rglob("*")), tmp_path / "state_iter.txt"]:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        mode = stat.S_IMODE(st.st_mode)
        checked += 1
        if mode & stat.S_IWOTH or mode & ~allowed:
            bad.append(f"{oct(mode)} {path.relative_to(tmp_path)}")
    assert checked > 15
    assert not bad, f"umask {oct(umask)}: {bad}"


@pytest.mark.parametrize(
    "field, value",
    [
        ("chain_id", "c-1\ntouch pwned"),
        ("chain_id", "c 1"),
        ("chain_id", "x" * 81),
        ("runner_job_id", "--user=alice"),
        ("submitter_job_id", "12; rm -rf ~"),
        ("next_job_id", "-1"),
    ],
)
def test_tampered_ids_in_state_json_are_refused(tmp_path: Path, field: str, value: str) -> None:
    """A chain id that would leave its line of a script, or a job id that
    would be an option to scancel/squeue, never gets past loading."""
    from chain.errors import ChainDirError
    from chain.store import ChainStatus

    good = {"chain_id": "chain-abc123", "state": "stopped", "submitter_job_id": "41", "runner_job_id": "42"}
    with pytest.raises(ChainDirError, match=f"bad {field}"):
        ChainStatus.from_json({**good, field: value}, tmp_path / "state.json")
    assert ChainStatus.from_json({**good, "runner_job_id": "4242_7"}, tmp_path / "s").runner_job_id == "4242_7"


def test_rendering_refuses_a_value_that_spans_lines(tmp_path: Path) -> None:
    from chain.api.templating import render_scripts
    from chain.core.resolution import resolve
    from chain.errors import ConfigError

    settings = resolve({"app_cmd": "true"}, {}, {})
    with pytest.raises(ConfigError, match="spans lines"):
        render_scripts(settings, chain_id="c-1\ntouch pwned", chain_dir=tmp_path, workdir=tmp_path)
    assert "c-1" in render_scripts(settings, chain_id="c-1", chain_dir=tmp_path, workdir=tmp_path).runner


def test_a_symlink_planted_at_the_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """Job scripts and state are written through chain.primitives.atomic (chain.app.atomic): its
    temporary is created O_EXCL|O_NOFOLLOW, so a planted link's target is
    never written (it was: scripts/runner.tmp was opened with write_text)."""
    from chain.app.atomic import tmp_name, write_text_atomic

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = tmp_path / "runner.sbatch"
    os.symlink(victim, tmp_name(target))
    write_text_atomic(target, "#!/bin/bash\n", mode=0o700)
    assert victim.read_text() == "precious\n"
    assert target.read_text() == "#!/bin/bash\n" and not target.is_symlink()
    assert not os.path.lexists(tmp_name(target))


@pytest.mark.parametrize("bad", ["--user=alice", "1 2", "12;touch x", "-1", ""])
def test_the_slurm_backend_refuses_what_is_not_a_job_id(bad: str, tmp_path: Path) -> None:
    """Defence in depth behind state.json's validation: a value that is not
    a job id never reaches scancel/squeue/sacct (as an option or otherwise)."""
    from chain.backends.slurm.cli import SlurmCliBackend
    from chain.errors import SchedulerError

    def run(*args: Any, **kwargs: Any) -> Any:
        pytest.fail(f"a Slurm command ran: {args}")

    backend = SlurmCliBackend(run=run)
    with pytest.raises(SchedulerError, match="not a Slurm job id"):
        backend.cancel(bad)
    if bad:
        with pytest.raises(SchedulerError, match="not a Slurm job id"):
            backend.query([bad])
