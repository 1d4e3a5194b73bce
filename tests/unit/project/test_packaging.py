"""A normal (non-editable) install carries the templates and shell helpers,
and the `chain` command its metadata declares runs."""

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_wheel_ships_templates_and_helpers_and_renders(tmp_path: Path) -> None:
    # from a copy of the tracked files: a build in the checkout writes build/ and the egg-info there
    source = tmp_path / "src"
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True, timeout=60
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        target = source / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name.decode(), target)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("slurm_chain-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "chain/templates/runner.sbatch.j2",
        "chain/templates/submitter.sbatch.j2",
        "chain/shell/chain.sh",
        "chain/shell/chain.R",
        "chain/py.typed",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    # The console script the wheel declares (its entry_points.txt, read, not
    # just found): exactly `chain = chain.cli:main`.
    [entry_file] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    entry_points = configparser.ConfigParser()
    entry_points.read_string(zipfile.ZipFile(wheel).read(entry_file).decode())
    assert {s: dict(entry_points[s]) for s in entry_points.sections()} == {
        "console_scripts": {"chain": "chain.cli:main"}
    }, entry_points.sections()
    module, _, attr = entry_points["console_scripts"]["chain"].partition(":")
    # Run that entry point from the unpacked wheel alone (the installed layout
    # finds its templates): `chain render` through the declared module:function.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import importlib, sys; sys.path.insert(0, sys.argv[1]); import chain.api.templating as r; "
        "assert r.builtin_template_dir() == __import__('pathlib').Path(sys.argv[1]) / 'chain' / 'templates', "
        "r.builtin_template_dir(); main = getattr(importlib.import_module(sys.argv[2]), sys.argv[3]); "
        "assert importlib.import_module(sys.argv[2]).__file__.startswith(sys.argv[1]); "
        "sys.argv = ['chain', 'render', '--app-cmd', 'x']; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(site), module, attr],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --job-name=" in out.stdout and "_runner" in out.stdout


@pytest.mark.local
def test_the_release_installs_from_its_wheel_and_runs_the_quick_start() -> None:
    """scripts/release-check: sdist and wheel by `python -m build`, the wheel
    installed (not editable) into a fresh venv, the README's quick start run
    with it to a completed chain and its report."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "release-check"), sys.executable],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "release-check: ok: " in proc.stdout, proc.stdout
