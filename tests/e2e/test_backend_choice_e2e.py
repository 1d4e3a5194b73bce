"""`--backend auto` as a user meets it, with `chain` run
as a process: Slurm's real clients at a controller that does not answer
(SLURM_CONF naming a dead port) are refused in one line; a machine with no
Slurm client at all runs the chain on the embedded local backend.

pyslurm is hidden (a sitecustomize on PYTHONPATH) so this machine's own
install does not decide the case. The in-process cases are in
tests/unit/backends/test_backends.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SITECUSTOMIZE = """
import sys
class _NoPyslurm:
    def find_spec(self, fullname, path, target=None):
        if fullname.partition(".")[0] == "pyslurm":
            raise ModuleNotFoundError("pyslurm hidden by the test", name="pyslurm")
        return None
sys.meta_path.insert(0, _NoPyslurm())
"""


def _chain(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chain", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _env_without_pyslurm(tmp_path: Path, path: str) -> dict[str, str]:
    site = tmp_path / "hide-pyslurm"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if k not in ("CHAIN_BACKEND", "SLURM_CONF")}
    return {**env, "PATH": path, "PYTHONPATH": os.pathsep.join((str(site), str(REPO)))}


@pytest.mark.slurm
def test_the_real_clients_at_a_dead_controller_are_refused(tmp_path: Path) -> None:
    """Slurm's own clients (installed with the dev cluster), SLURM_CONF
    naming a controller on a port nobody listens on: `chain submit` exits 2
    with the refusal and leaves no chain directory. The cluster itself is
    not used (nor touched)."""
    assert shutil.which("sbatch"), "the Slurm clients are not installed (bash scripts/dev-cluster up installs them)"
    conf = tmp_path / "slurm.conf"
    # MessageTimeout=1: the clients give up at once instead of after 10 s
    conf.write_text(
        "ClusterName=dead\nSlurmctldHost=localhost\nSlurmctldPort=1\nMessageTimeout=1\n"
        "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=debug Nodes=localhost Default=YES\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {**_env_without_pyslurm(tmp_path, os.environ["PATH"]), "SLURM_CONF": str(conf)}
    out = _chain(["submit", "--app-cmd", "true", "--max-iter", "1"], work, env)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.startswith(
        "chain: error: --backend auto: Slurm is installed here (sbatch on PATH) but its controller did not answer"
    ), out.stderr
    assert out.stderr.rstrip().endswith("--backend local runs it on this machine"), out.stderr
    assert out.stderr.count("\n") == 1 and not (work / ".chain").exists()


@pytest.mark.local
def test_without_any_slurm_client_a_chain_runs_on_local(tmp_path: Path) -> None:
    """A machine with no Slurm at all (no sbatch on PATH, no pyslurm): auto
    says it chose the embedded backend, and the chain completes on it."""
    bare = tmp_path / "bin"  # bash and python3, and no Slurm client
    bare.mkdir()
    os.symlink(sys.executable, bare / "python3")
    os.symlink(shutil.which("bash") or "/bin/bash", bare / "bash")
    work = tmp_path / "work"
    work.mkdir()
    env = _env_without_pyslurm(tmp_path, str(bare))
    out = _chain(
        ["submit", "--app-cmd", 'echo 3 > "$CKPT_PATH"', "--max-iter", "3", "--poll-max", "5", "--wait"], work, env
    )
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    assert "on local (auto: no Slurm here (no sbatch on PATH, no pyslurm)" in out.stdout, out.stdout
