"""The dev cluster itself: up/down/up cycles, accounting of a failed job, job slots.

This file is collected first under tests/slurm (test_00_), and its first test is the
up/down cycle, so the later Slurm tests run on a cluster that has just proven it
restarts cleanly. Every test leaves the cluster UP.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

# The slurm_cluster fixture (tests/conftest.py): .slurm_conf, .node, .dir, .script
SlurmCluster = Any

DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")


def run(*cmd: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def daemon_pids(cluster: SlurmCluster) -> dict[str, int]:
    pids = {}
    for name in DAEMONS:
        f = Path(cluster.dir) / "run" / f"{name}.pid"
        if f.exists() and f.read_text().strip():
            pids[name] = int(f.read_text().strip())
    return pids


def dev_cluster(cluster: SlurmCluster, verb: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return run("bash", str(cluster.script), verb, timeout=timeout, check=False)


def node_state(cluster: SlurmCluster) -> str:
    return run("sinfo", "-h", "-n", cluster.node, "-o", "%T", check=False).stdout.strip()


def submit(*args: str) -> str:
    out = run("sbatch", "--parsable", *args).stdout.strip()
    return out.split(";")[0]


def poll(what: str, fn, timeout: float, interval: float = 0.5):  # type: ignore[no-untyped-def]
    """Call fn until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


@pytest.mark.alone  # takes the cluster down under every other test
@pytest.mark.timeout(420)
def test_up_down_up_cycle_twice(slurm_cluster: SlurmCluster) -> None:
    t0 = time.monotonic()
    # Already up: a second `up` is quick and keeps the same daemons.
    before = daemon_pids(slurm_cluster)
    assert set(before) == set(DAEMONS), before
    t = time.monotonic()
    again = dev_cluster(slurm_cluster, "up", timeout=120)
    assert again.returncode == 0, again.stderr
    assert time.monotonic() - t < 30, "a second `up` should be quick"
    assert daemon_pids(slurm_cluster) == before

    for cycle in (1, 2):
        pids = daemon_pids(slurm_cluster)
        assert set(pids) == set(DAEMONS), f"cycle {cycle}: pid files {pids}"
        assert all(alive(p) for p in pids.values()), f"cycle {cycle}: {pids}"

        t = time.monotonic()
        down = dev_cluster(slurm_cluster, "down", timeout=150)
        t_down = time.monotonic() - t
        assert down.returncode == 0, down.stderr
        still = {n: p for n, p in pids.items() if alive(p)}
        assert not still, f"cycle {cycle}: alive after down: {still}"
        status = dev_cluster(slurm_cluster, "status", timeout=60)
        assert status.returncode != 0, status.stdout
        for name in DAEMONS:
            assert f"{name:<10} not running" in status.stdout, status.stdout

        t = time.monotonic()
        up = dev_cluster(slurm_cluster, "up", timeout=300)
        t_up = time.monotonic() - t
        assert up.returncode == 0, f"cycle {cycle}: up failed\n{up.stdout}\n{up.stderr}"
        new = daemon_pids(slurm_cluster)
        assert set(new) == set(DAEMONS) and all(alive(p) for p in new.values()), new
        assert node_state(slurm_cluster) in ("idle", "mixed", "allocated"), node_state(slurm_cluster)
        run("sacct", "-n", "-X", "-S", "now-1hours", "-o", "JobIDRaw")
        print(f"cycle {cycle}: down {t_down:.1f} s, up {t_up:.1f} s")

    status = dev_cluster(slurm_cluster, "status", timeout=60)
    assert status.returncode == 0, status.stdout
    print(f"whole cycle test: {time.monotonic() - t0:.1f} s")


@pytest.mark.timeout(180)
def test_failed_job_state_and_exit_code(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    script = tmp_path / "exit3.sh"
    script.write_text("#!/bin/bash\necho about to fail\nexit 3\n")
    job = submit("-J", "dc-exit3", "--chdir", str(tmp_path), "-o", str(tmp_path / "%j.out"), str(script))

    def scontrol_final() -> str | None:
        out = run("scontrol", "show", "job", job).stdout
        return out if "JobState=FAILED" in out or "JobState=COMPLETED" in out else None

    shown = poll(f"job {job} to end (scontrol)", scontrol_final, timeout=90)
    assert "JobState=FAILED" in shown and "ExitCode=3:0" in shown, shown

    def sacct_final() -> str | None:
        out = run("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobIDRaw,State,ExitCode").stdout
        line = out.strip()
        return line if line.startswith(f"{job}|") and "RUNNING" not in line and "PENDING" not in line else None

    assert poll(f"sacct record of job {job}", sacct_final, timeout=60) == f"{job}|FAILED|3:0"
    assert (tmp_path / f"{job}.out").read_text() == "about to fail\n"


@pytest.mark.timeout(180)
def test_four_single_cpu_jobs_run_at_once(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    jobs = [
        submit(
            "-J",
            f"dc-slot{i}",
            "-n",
            "1",
            "--mem=512M",
            "--chdir",
            str(tmp_path),
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 60",
        )
        for i in range(4)
    ]
    try:

        def all_running() -> bool:
            out = run("squeue", "-h", "--states=all", "-j", ",".join(jobs), "-o", "%i|%T").stdout
            states = dict(line.split("|") for line in out.split())
            return len(states) == 4 and all(s == "RUNNING" for s in states.values())

        poll("4 jobs RUNNING at once", all_running, timeout=60)
    finally:
        run("scancel", *jobs, check=False)

        def gone() -> bool:
            out = run("squeue", "-h", "-j", ",".join(jobs), "-o", "%T", check=False).stdout
            return not out.strip()

        poll("the sleep jobs to leave the queue", gone, timeout=60)


# ---- ports: a second cluster beside this one (scripts/in-debian's roots run one)

REPO = Path(__file__).resolve().parents[2]


def test_the_cluster_listens_on_the_ports_of_its_port_base(slurm_cluster: SlurmCluster) -> None:
    """scontrol shows the ports `dev-cluster env` promises (6817.. here, another base in a
    scripts/in-debian root), so two clusters beside each other never share one."""
    env = dev_cluster(slurm_cluster, "env", timeout=30)
    assert env.returncode == 0, env.stderr
    found = re.search(r"CHAIN_DEV_CLUSTER_PORT_BASE=(\d+)", env.stdout)
    assert found, env.stdout
    base = int(found.group(1))
    config = run("scontrol", "show", "config").stdout
    for key, port in (("SlurmctldPort", base), ("SlurmdPort", base + 1), ("AccountingStoragePort", base + 2)):
        assert re.search(rf"^{key}\s*=\s*{port}\s*$", config, re.MULTILINE), f"{key} is not {port}"


@pytest.mark.parametrize("var", ["CHAIN_DEV_CLUSTER_PORT_BASE", "CHAIN_DEV_CLUSTER_DB_PORT"])
def test_a_bad_port_is_refused_in_one_line(var: str) -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "dev-cluster"), "status"],
        env={**os.environ, var: "80"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and var in proc.stderr, proc.stderr


def test_in_debian_refuses_an_unknown_release_in_one_line() -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "in-debian"), "potato", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "unknown release 'potato'" in proc.stderr
