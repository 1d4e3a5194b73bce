"""A normal (non-editable) install carries the templates and shell helpers."""

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_ships_templates_and_helpers_and_renders(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(REPO)], check=True, timeout=300)
    wheel = next(tmp_path.glob("slurm_chain-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("chain/templates/runner.sbatch.j2", "chain/templates/submitter.sbatch.j2",
                     "chain/shell/chain.sh", "chain/shell/chain.R", "chain/py.typed"):
        assert required in names, f"{required} missing from {wheel.name}"
    assert any(n.endswith("entry_points.txt") and "chain" in n for n in names)
    # Render from the unpacked wheel alone: the installed layout finds its templates.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import chain.jobs.render as r; "
            "assert r.builtin_template_dir() == __import__('pathlib').Path(sys.argv[1]) / 'chain' / 'templates', "
            "r.builtin_template_dir(); from chain.cli import main; sys.argv = ['chain', 'render', '--app-cmd', 'x']; main()")
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --job-name=" in out.stdout and "_runner" in out.stdout
