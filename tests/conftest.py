"""Top-level pytest setup: the real Slurm cluster fixture, the real pyslurm
(for the backend and e2e tests alike) and the `slurm` marker.

Keep this file small. Fixtures for one area of tests go in tests/<subdir>/conftest.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Chains the tests submit are registered for `chain list` here, never in the
# state directory of the user running the tests.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="chain-test-state-")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEV_CLUSTER = REPO_ROOT / "scripts" / "dev-cluster"
# The first `up` on a new machine installs Debian packages (~20-60 s); later ones take seconds.
UP_TIMEOUT = 900


@dataclass(frozen=True)
class SlurmCluster:
    slurm_conf: str  # path of the cluster's slurm.conf (also in os.environ["SLURM_CONF"])
    node: str  # the one node's name
    dir: str  # the dev-cluster directory (pid files in run/, logs in log/)
    script: Path  # scripts/dev-cluster

    def __getitem__(self, key: str) -> object:  # cluster["node"] works too
        return getattr(self, key)


def dev_cluster(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run scripts/dev-cluster with ARGS, capturing its output."""
    return subprocess.run(
        ["bash", str(DEV_CLUSTER), *args],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def apply_env(text: str) -> dict[str, str]:
    """Put the `export NAME=VALUE` lines of `dev-cluster env` into os.environ."""
    applied: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] != ["export"]:
            continue
        for word in words[1:]:
            name, sep, value = word.partition("=")
            if sep:
                os.environ[name] = value
                applied[name] = value
    return applied


def _fail(what: str, proc: subprocess.CompletedProcess[str] | None = None) -> None:
    detail = f"\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}" if proc else ""
    pytest.fail(f"{what}{detail}", pytrace=False)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The real single-node Slurm cluster, started (if needed) by scripts/dev-cluster up.

    A test that needs it and cannot get it fails; it is never skipped. The cluster is
    left running at the end of the session.
    """
    try:
        up = dev_cluster("up", timeout=UP_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        _fail(f"scripts/dev-cluster up did not finish in {UP_TIMEOUT} s: {exc}")
        raise  # unreachable; for type checkers
    if up.returncode != 0:
        _fail(f"scripts/dev-cluster up failed (exit {up.returncode})", up)
    env = dev_cluster("env", timeout=30)
    if env.returncode != 0:
        _fail(f"scripts/dev-cluster env failed (exit {env.returncode})", env)
    applied = apply_env(env.stdout)
    if "SLURM_CONF" not in applied:
        _fail("scripts/dev-cluster env printed no SLURM_CONF", env)
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    yield SlurmCluster(
        slurm_conf=applied["SLURM_CONF"],
        node=node,
        dir=applied.get("CHAIN_DEV_CLUSTER_DIR", "/var/lib/chain-dev-cluster"),
        script=DEV_CLUSTER,
    )


@pytest.fixture
def real_pyslurm(slurm_cluster: SlurmCluster) -> str:
    """The real pyslurm's version, once it imports and matches the running Slurm.

    Where it does not (``bash scripts/setup --pyslurm`` builds it) the test
    skips with the reason, except under CI=true, where it fails: CI builds pyslurm.
    """
    from chain.backends.slurm.pyslurm import PyslurmBackend
    from chain.errors import BackendUnavailable

    try:
        backend = PyslurmBackend()
    except BackendUnavailable as exc:
        why = str(exc)
    else:
        return backend.version
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI builds pyslurm (bash scripts/setup --pyslurm), yet: {why}", pytrace=False)
    pytest.skip(f"no real pyslurm here: {why}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: the marker must be on the items before `-m slurm` deselects by it.
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
