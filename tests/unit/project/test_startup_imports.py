"""`chain status` starts without what only submitting needs: chain.api loads
its modules on first use (its target: 0.3 s on 10 000 runners)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types

from chain import api


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


def test_the_status_path_imports_no_submission_templates_or_jobs() -> None:
    loaded = _modules_after("import chain.cli.commands, chain.cli.status_view, chain.api.status")
    heavy = {
        "chain.api.submission",
        "chain.api.cancelling",
        "chain.api.handle",
        "chain.api.templating",
        "jinja2",
        "logging",
        "hashlib",
    }  # stdlib, 4-7 ms each, used only by apps and saves
    assert not heavy & loaded, sorted(heavy & loaded)


def test_a_runner_job_loads_nothing_only_a_submission_or_a_verification_needs() -> None:
    """A runner's start is paid in CPU on a sweep's busy nodes, 16 runners
    starting at once on 2 CPUs in bench/sweep.py: what its code imports
    (the job entry, the runner, the modes, the Slurm CLI backend, the chain
    directory) leaves out the site's limits, checkpoint verification,
    shutil's compression modules, the reading of 0.1.0's reasons, glob (a
    ``glob:`` counter's) and traceback (a forked child's on a fault)."""
    loaded = _modules_after(
        "import chain.jobs.entry, chain.jobs.runner, chain.modes, chain.backends.slurm.cli, chain.store.view"
    )
    only_elsewhere = {
        "chain.core.limits",
        "chain.backends.slurm.limits",
        "chain.core.verify",
        "chain.jobs.verify",
        "shutil",
        "chain.core.legacy",
        "glob",
        "traceback",
        "textwrap",
        "typer",
        "jinja2",
    }
    assert not only_elsewhere & loaded, sorted(only_elsewhere & loaded)


def test_every_public_name_resolves_to_its_module() -> None:
    """Also once every module is loaded: importing a submodule sets the
    package's attribute of its name, which would shadow a lazy name."""
    assert sorted(api.__all__) == sorted(api._HOMES)
    for home in set(api._HOMES.values()):
        importlib.import_module(f"chain.api.{home}")
    for name in api.__all__:
        value = getattr(api, name)
        assert not isinstance(value, types.ModuleType), f"chain.api.{name} is a module"
        assert getattr(value, "__module__", f"chain.api.{api._HOMES[name]}").startswith("chain.api."), name


def test_the_type_checking_imports_are_the_lazy_names() -> None:
    """chain.api names each public name three times (TYPE_CHECKING imports
    for type checkers, _HOMES for the lazy lookup, a literal __all__): they
    must say the same, module by module."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(api.__file__).read_text())
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    )
    imported = {
        alias.name: node.module.removeprefix("chain.api.")
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    assert imported == api._HOMES
