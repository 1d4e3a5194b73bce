"""scripts/in-debian and scripts/dev-cluster, their functions run on literal input (both
scripts only define their functions when sourced): no root, no debootstrap, no daemons.

Why: in-debian read dev-cluster's package list by a sed of its source, which a trailing
comment broke, and its `die` inside `$(...)` ended only the command substitution, so the
build went on with no packages; a root whose cluster did not start, or could not be built,
did not end its output with the cause; a failed mariadb-install-db left a half-made datadir
that the next `up` reused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
IN_DEBIAN = REPO / "scripts" / "in-debian"
DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")
Proc = subprocess.CompletedProcess[str]


def bash(script: str, *, env: dict[str, str] | None = None, path: Path | None = None) -> Proc:
    """Run SCRIPT with bash; PATH starts with PATH (stubs) if given."""
    full = {**os.environ, **(env or {})}
    if path is not None:
        full["PATH"] = f"{path}:{full['PATH']}"
    return subprocess.run(["bash", "-c", script], env=full, capture_output=True, text=True, timeout=60, check=False)


def stub(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text("#!/bin/bash\n" + body)
    (bin_dir / name).chmod(0o755)


def last_line(text: str) -> str:
    return text.rstrip("\n").rsplit("\n", 1)[-1]


def fake_checkout(tmp_path: Path, dev_cluster: str | None) -> Path:
    """A checkout with this in-debian and, as its scripts/dev-cluster, the real one (None) or
    a stub with body DEV_CLUSTER."""
    scripts = tmp_path / "checkout" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy(IN_DEBIAN, scripts / "in-debian")
    if dev_cluster is None:
        shutil.copy(DEV_CLUSTER, scripts / "dev-cluster")
    else:
        (scripts / "dev-cluster").write_text("#!/bin/bash\n" + dev_cluster)
    return scripts / "in-debian"


# ---- the packages of dev-cluster, as in-debian gets them


def test_dev_cluster_packages_prints_package_names() -> None:
    proc = subprocess.run(
        ["bash", str(DEV_CLUSTER), "packages"],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    names = proc.stdout.splitlines()
    assert all(PACKAGE_NAME.match(n) for n in names), names
    assert {"slurm-wlm", "slurmdbd", "munge", "mariadb-server"} <= set(names)


def test_in_debian_installs_what_dev_cluster_prints() -> None:
    listed = subprocess.run(["bash", str(DEV_CLUSTER), "packages"], capture_output=True, text=True, check=True)
    proc = bash(f"source {IN_DEBIAN} && cluster_packages")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == " ".join(listed.stdout.split()) + "\n"


def test_sourcing_runs_nothing() -> None:
    for script in (IN_DEBIAN, DEV_CLUSTER):
        proc = bash(f"source {script} && echo sourced")
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "sourced\n", ""), script


@pytest.mark.parametrize(
    ("dev_cluster", "says"),
    [
        ("echo 'dev-cluster: ERROR: broken' >&2; exit 1\n", "`scripts/dev-cluster packages` failed"),
        ("exit 0\n", "printed no list of package names"),
        ("echo 'slurm-wlm munge  # a comment'\n", "printed no list of package names"),
    ],
)
def test_no_package_list_stops_the_caller(tmp_path: Path, dev_cluster: str, says: str) -> None:
    """cluster_packages dies in its $(...), and the build's check of it stops the build."""
    in_debian = fake_checkout(tmp_path, dev_cluster)
    proc = bash(f"source {in_debian}; list=$(cluster_packages) || exit 1; echo went on with $list")
    assert proc.returncode == 1 and "went on" not in proc.stdout, proc.stdout
    assert last_line(proc.stderr).startswith("in-debian: ERROR: ") and says in proc.stderr, proc.stderr


def build_stage(tmp_path: Path, in_debian: Path) -> Proc:
    """in-debian's build stage of bookworm into tmp_path/new, its debootstrap a stub that says
    why it fails (the archive unreachable) and leaves a mark."""
    bin_dir = tmp_path / "bin"
    stub(
        bin_dir,
        "debootstrap",
        f"touch {tmp_path}/debootstrap-ran\n"
        "echo 'I: Retrieving InRelease'\n"
        "echo 'E: Failed getting release file http://deb.example/debian/dists/bookworm/Release'\n"
        "exit 1\n",
    )
    return bash(
        f"source {in_debian}; set_release bookworm; MIRROR=http://deb.example/debian; "
        f"stage_build {tmp_path}/new >{tmp_path}/build.log 2>&1",
        env={"CHAIN_DEBIAN_CACHE": str(tmp_path / "cache")},
        path=bin_dir,
    )


def test_the_build_stops_before_debootstrap_without_the_package_list(tmp_path: Path) -> None:
    in_debian = fake_checkout(tmp_path, "exit 3\n")
    proc = build_stage(tmp_path, in_debian)
    assert proc.returncode == 1
    assert not (tmp_path / "debootstrap-ran").exists()
    log = (tmp_path / "build.log").read_text()
    assert "dev-cluster packages` failed" in last_line(log), log


def test_a_failed_build_ends_in_one_line_naming_release_step_and_cause(tmp_path: Path) -> None:
    """What main says last when the build stage failed (here: debootstrap, archive unreachable)."""
    in_debian = fake_checkout(tmp_path, None)
    assert build_stage(tmp_path, in_debian).returncode == 1
    assert (tmp_path / "debootstrap-ran").exists()
    proc = bash(f"source {in_debian}; set_release bookworm; build_failure {tmp_path}/build.log")
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1, proc.stdout
    assert proc.stdout == (
        "the bookworm root could not be built: debootstrap of bookworm from http://deb.example/debian failed: "
        "E: Failed getting release file http://deb.example/debian/dists/bookworm/Release "
        f"(log: {tmp_path}/build.log)\n"
    )


def test_build_failure_of_a_log_with_no_tool_error(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("in-debian: debootstrap done in 80 s\nKilled\n")
    proc = bash(f"source {IN_DEBIAN}; set_release sid; build_failure {log}")
    assert proc.stdout == f"the sid root could not be built: the build stopped (log: {log})\n"


def test_a_cluster_that_did_not_start_is_the_last_line(tmp_path: Path) -> None:
    """The run stage, mounts and chroot stubbed: `dev-cluster up` fails; its ERROR line is the
    cause, said last, after the cleanup's own output; the command never runs."""
    proc = bash(
        f"source {IN_DEBIAN}; set_release trixie; ROOT={tmp_path}/root\n"
        "mount_root() { :; }\n"
        "point_venv_at_checkout() { :; }\n"
        "in_root() {\n"
        '    case "$3 $4" in\n'
        "        */dev-cluster\\ up) echo 'dev-cluster: initialising mariadb datadir' >&2\n"
        "            echo 'dev-cluster: ERROR: mariadb-install-db failed (its half-made datadir removed)' >&2\n"
        "            return 1 ;;\n"
        "        */dev-cluster\\ down) echo 'dev-cluster: stopped munged (12) in 0 s' >&2 ;;\n"
        '        *) echo ran: "$@" ;;\n'
        "    esac\n"
        "}\n"
        "stage_run echo the command",
    )
    assert proc.returncode == 1 and "ran:" not in proc.stdout, proc.stdout
    assert "stopped munged" in proc.stderr
    assert last_line(proc.stderr) == (
        "in-debian: ERROR: the trixie root's dev cluster did not start: "
        "dev-cluster: ERROR: mariadb-install-db failed (its half-made datadir removed)"
    ), proc.stderr


# ---- dev-cluster's mariadb: its own tmpdir, a datadir made whole or not at all


def dev_cluster(tmp_path: Path, script: str, install_db: str = "exit 0\n") -> Proc:
    """SCRIPT after sourcing dev-cluster with its DIR in tmp_path; mariadb-install-db a stub
    with body INSTALL_DB (its --datadir in $datadir)."""
    bin_dir = tmp_path / "bin"
    stub(
        bin_dir,
        "mariadb-install-db",
        f"echo run >>{tmp_path}/install-db-runs\n"
        "for a; do case $a in --datadir=*) datadir=${a#--datadir=} ;; esac; done\n" + install_db,
    )
    return bash(
        f"source {DEV_CLUSTER}; mkdir -p $ETC $LOG; {script}",
        env={"CHAIN_DEV_CLUSTER_DIR": str(tmp_path / "dc")},
        path=bin_dir,
    )


def test_mariadb_gets_a_tmpdir_of_its_own(tmp_path: Path) -> None:
    proc = dev_cluster(tmp_path, "NODES=0; write_config")
    assert proc.returncode == 0, proc.stderr
    cnf = (tmp_path / "dc" / "etc" / "my.cnf").read_text()
    assert f"\ntmpdir={tmp_path}/dc/tmp\n" in cnf and "/tmp\n" not in cnf.replace(f"{tmp_path}/dc/tmp", "")
    assert (tmp_path / "dc" / "tmp").stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / "dc" / "mysql").exists()  # made by init_datadir only


def test_a_failed_install_db_leaves_no_datadir(tmp_path: Path) -> None:
    half_made = 'mkdir -p "$datadir/mysql" && touch "$datadir/mysql/user.frm"\necho ERROR: 1051 >&2; exit 1\n'
    proc = dev_cluster(tmp_path, "init_datadir", half_made)
    assert proc.returncode == 1
    assert last_line(proc.stderr).startswith("dev-cluster: ERROR: mariadb-install-db failed"), proc.stderr
    assert sorted(p.name for p in (tmp_path / "dc").iterdir()) == ["etc", "log"]
    # the next one initialises afresh
    proc = dev_cluster(tmp_path, "init_datadir", 'mkdir -p "$datadir/mysql"\n')
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dc" / "mysql" / "mysql").is_dir() and not (tmp_path / "dc" / "mysql.new").exists()
    assert (tmp_path / "install-db-runs").read_text() == "run\nrun\n"


def test_a_made_datadir_is_kept_and_an_empty_one_made_again(tmp_path: Path) -> None:
    made = 'mkdir -p "$datadir/mysql" && touch "$datadir/mysql/made"\n'
    assert dev_cluster(tmp_path, "init_datadir", made).returncode == 0
    assert dev_cluster(tmp_path, "init_datadir", made).returncode == 0
    assert (tmp_path / "install-db-runs").read_text() == "run\n"  # the second found it made
    shutil.rmtree(tmp_path / "dc" / "mysql")
    (tmp_path / "dc" / "mysql").mkdir()  # empty, as write_config made it before
    assert dev_cluster(tmp_path, "init_datadir", made).returncode == 0
    assert (tmp_path / "dc" / "mysql" / "mysql" / "made").exists()
    assert (tmp_path / "install-db-runs").read_text() == "run\nrun\n"
