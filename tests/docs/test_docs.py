"""The docs cannot rot: the site builds with --strict, the generated pages
cover every setting and command, the README stays a short user's page, and
every shell block marked ``<!-- test: local slurm -->`` (or ``local``) on any
page runs as written, on the backends it names. The other snippets' tests
are beside it: ``test_python_snippets.py`` (Python blocks),
``test_command_lines.py`` (``chain`` command lines), ``test_user_pages.py``
(what a user page may say)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import snippets as sn

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
sys.path.insert(0, str(DOCS / "gen"))
import pages

BACKENDS = ("local", "slurm")


def runnable_blocks(path: Path) -> list[tuple[list[str], str]]:
    """The marked shell blocks of a page, in order: (backends, script)."""
    return [
        (list(b.marks), b.text)
        for b in sn.blocks(path)
        if b.lang == "bash" and b.marks and set(b.marks) <= set(BACKENDS)
    ]


def _snippets() -> list[object]:
    params = []
    for page in sn.doc_pages():
        named = {backend for backends, _ in runnable_blocks(page) for backend in backends}
        for backend in sorted(named):
            mark = pytest.mark.slurm if backend == "slurm" else pytest.mark.local
            params.append(pytest.param(page.name, backend, marks=mark, id=f"{page.name}-{backend}"))
    return params


def test_runnable_blocks_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("x\n<!-- test: local slurm -->\n```bash\necho hi\n```\n```bash\nnot marked\n```\n")
    assert runnable_blocks(page) == [(["local", "slurm"], "echo hi\n")]
    assert len(runnable_blocks(DOCS / "quickstart.md")) >= 2
    assert {p.values[0] for p in _snippets()} >= {"quickstart.md", "app-contract.md", "files.md"}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("page", "backend"), _snippets())
def test_marked_shell_blocks_run(page: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A page's marked blocks for one backend run in order in one directory,
    as a reader types them, each in a subshell (a block's `cd` is its own)."""
    if backend == "slurm":
        request.getfixturevalue("slurm_cluster")
    path = REPO / page if page == "README.md" else DOCS / page
    blocks = [body for backends, body in runnable_blocks(path) if backend in backends]
    script = "set -euo pipefail\n" + "".join(f"(\n{body})\necho '@@ block {n} ran'\n" for n, body in enumerate(blocks))
    env = dict(os.environ, CHAIN_BACKEND=backend, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    ran = proc.stdout.count("@@ block ")
    output = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and ran == len(blocks), f"{page}: block {ran} (from 0) failed on {backend}:\n{output}"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    env = dict(os.environ, DISABLE_MKDOCS_2_WARNING="true", NO_MKDOCS_2_WARNING="1")  # banners, not errors
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    settings = (tmp_path / "site" / "settings" / "index.html").read_text(encoding="utf-8")
    assert "--runner-margin" in settings and "RUNNER_MARGIN_SEC" in settings


def test_every_setting_has_its_documented_row() -> None:
    from chain.core.fields import FIELDS

    page = pages.settings_page()
    for spec in FIELDS:
        assert len(spec.help.split()) >= 2, f"setting {spec.name} has no real documentation: {spec.help!r}"
        row = next((line for line in page.splitlines() if line.startswith(f"| `{spec.option}`")), None)
        assert row is not None, f"setting {spec.name} has no row on the settings page"
        assert f"`{spec.env}`" in row and f"`{spec.name}`" in row and spec.help in row.replace("\\|", "|")


def test_commands_page_has_every_command() -> None:
    import typer.main

    from chain.cli.commands import app

    page = pages.commands_page()
    group = typer.main.get_command(app)
    visible = [name for name, cmd in group.commands.items() if not cmd.hidden]  # type: ignore[attr-defined]
    assert {"submit", "status", "render", "cancel"} <= set(visible)
    for name in visible:
        assert f"## chain {name}\n" in page
    assert "--max-iter" in page  # the settings options are in submit's help


def test_readme_is_a_short_users_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"
    first_screen = "\n".join(lines[:60]).lower()
    for needed in ("install", "quick start", "app contract"):
        assert needed in first_screen, f"{needed!r} not in the README's first screen"
    assert not re.search(r"\b[0-9a-f]{7,40}\b(?<!\d{7})", readme.replace("chain-", "")), "commit hash in README"
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO / target).is_file(), f"README links to missing {target}"


REASON_MODULES = ("chain/core/decision.py", "chain/core/runner_rules.py")


def reason_fragments(source: str) -> set[str]:
    """The literal words of every string the module can print, docstrings
    left out: each text between placeholders that has two words or more."""
    import ast

    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    annotations = {
        id(inner) for node in ast.walk(tree) if isinstance(node, ast.Subscript) for inner in ast.walk(node.slice)
    }  # Callable[..., "Decision | None"]
    fragments: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings | annotations:
            text = " ".join(node.value.split()).strip(" ,:;(")
            if len(text.split()) >= 2:
                fragments.add(text)
    return fragments


def test_reason_fragments_are_found() -> None:
    source = 'def f(x):\n    """Doc string here."""\n    return f"runner {x} without a record (exit {x})"\n'
    assert reason_fragments(source) == {"without a record (exit"}


@pytest.mark.parametrize("module", REASON_MODULES)
def test_troubleshooting_lists_every_reason(module: str) -> None:
    page = " ".join((DOCS / "troubleshooting.md").read_text(encoding="utf-8").split())
    missing = sorted(text for text in reason_fragments((REPO / module).read_text(encoding="utf-8")) if text not in page)
    assert not missing, f"docs/troubleshooting.md lacks these texts of {module}: {missing}"


def test_the_exit_code_tables_name_every_code() -> None:
    """The runner's table in the app contract and the command's codes in the
    cluster page list every code of chain.primitives.codes, and no other."""
    from chain.primitives.codes import CliExit, RunnerExit

    contract = (DOCS / "app-contract.md").read_text(encoding="utf-8")
    table = contract[contract.index("| runner exit |") :].split("\n\n")[0]
    listed = {int(n) for row in table.splitlines()[2:] for n in re.findall(r"\d+", row.split("|")[1])}
    assert listed == {int(code) for code in RunnerExit}
    cluster = " ".join((DOCS / "cluster.md").read_text(encoding="utf-8").split())
    paragraph = cluster[cluster.index("**Exit codes.**") : cluster.index("**Resume rule.**")]
    named = {int(n) for n in re.findall(r"\b(\d+) [a-z]", paragraph)}
    assert named == {int(code) for code in CliExit}, paragraph
