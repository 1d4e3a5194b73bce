"""chain.store.guarded (and chain.primitives.safeio under it): the one way
into a chain directory. No write or read follows a link out of
it, a FIFO or a device is refused at once (never waited on, never read
without end), each kind of file is read up to its cap; every refusal is one
line naming the file, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _chains import make_chain
from _hostile import assert_refused, fifo, link, run_cli, victim

from chain.core.model import ChainState
from chain.store import ChainDir, ChainStatus, JudgedRunner
from chain.store.guarded import ChainFileError, Guarded

pytestmark = pytest.mark.timeout(30)  # a FIFO that is waited on fails the test, not the run


@pytest.fixture
def chain_dir(tmp_path: Path) -> Path:
    root: Path = make_chain(tmp_path, 1, ChainState.RUNNING)
    return root


# --- writes: a link in the chain directory is never written through -----------------------------


def test_a_linked_state_json_is_not_read_outside(
    tmp_path: Path, chain_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside.json"
    (chain_dir / "state.json").rename(outside)
    link(chain_dir / "state.json", outside)
    assert_refused(run_cli(tmp_path, monkeypatch, ["status"]), "state.json is a symbolic link")
    assert_refused(run_cli(tmp_path, monkeypatch, ["cancel"]), "state.json is a symbolic link")
    ChainDir(chain_dir).save_status(ChainStatus(chain_id="chain-other"))  # a save replaces the link itself
    assert json.loads(outside.read_text())["chain_id"] == "chain-abcdef"
    assert not (chain_dir / "state.json").is_symlink()


def test_a_judged_runner_is_not_appended_through_a_linked_runners_log(tmp_path: Path, chain_dir: Path) -> None:
    target = victim(tmp_path)
    link(chain_dir / "runners.jsonl", target)
    with pytest.raises(ChainFileError, match="runners.jsonl is a symbolic link"):
        ChainDir(chain_dir).append_runner(JudgedRunner(job_id="11", seq=2))
    with pytest.raises(ChainFileError, match="runners.jsonl is a symbolic link"):
        ChainDir(chain_dir).last_runner()
    link(chain_dir / "worker_ids.txt", target)
    with pytest.raises(ChainFileError, match="worker_ids.txt is a symbolic link"):
        ChainDir(chain_dir).add_worker_id("11")
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("linked", ["scripts", "logs"])
def test_submit_refuses_linked_script_and_output_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".chain").mkdir()
    link(tmp_path / ".chain" / linked, elsewhere)
    result = run_cli(tmp_path, monkeypatch, ["submit", "--app-cmd", "true", "--max-iter", "1"])
    assert_refused(result, f".chain/{linked} is a symbolic link")
    assert not list(elsewhere.iterdir()), "a script or a job's output went outside the chain directory"
    assert not (tmp_path / ".chain" / "local-jobs").exists(), "something was submitted"


def test_the_report_is_not_written_into_a_linked_report_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.COMPLETED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link(chain_dir / "report", elsewhere)
    assert_refused(run_cli(tmp_path, monkeypatch, ["report"]), ".chain/report is a symbolic link")
    assert not list(elsewhere.iterdir())


def test_the_report_writer_replaces_a_linked_report_file(tmp_path: Path, chain_dir: Path) -> None:
    """``ChainDir.write_report``, the report's guarded writer: a link at
    ``report/usage.csv`` is replaced, its target untouched."""
    target = victim(tmp_path)
    (chain_dir / "report").mkdir()
    link(chain_dir / "report" / "usage.csv", target)
    path = ChainDir(chain_dir).write_report("usage.csv", b"seq,job_id\n")
    assert target.read_text() == "precious\n"
    assert path.read_bytes() == b"seq,job_id\n" and not path.is_symlink()


@pytest.mark.parametrize("name", ["usage.csv", "summary.json", "progress.png"])
def test_chain_report_replaces_a_linked_report_file_never_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.COMPLETED)
    target = victim(tmp_path)
    (chain_dir / "report").mkdir()
    link(chain_dir / "report" / name, target)
    result = run_cli(tmp_path, monkeypatch, ["report"])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert target.read_text() == "precious\n"
    assert not (chain_dir / "report" / name).is_symlink()


def test_job_scripts_and_outputs_go_through_the_guard(tmp_path: Path, chain_dir: Path) -> None:
    chain = ChainDir(chain_dir)
    script = chain.write_script("runner.sbatch", "#!/bin/bash\n")
    assert chain.script("runner.sbatch") == script and os.stat(script).st_mode & 0o777 == 0o700
    target = victim(tmp_path)
    link(chain_dir / "scripts" / "runner.sbatch", target)
    with pytest.raises(ChainFileError, match="runner.sbatch is a symbolic link"):
        chain.script("runner.sbatch")  # never handed to sbatch
    link(chain_dir / "logs" / "hook-report.log", target)
    with pytest.raises(ChainFileError, match="hook-report.log is a symbolic link"):
        chain.open_output("hook-report.log")
    assert target.read_text() == "precious\n"


# --- reads: a FIFO, a device, a link out: refused at once --------------------------------------


def _cli_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], planted: Path, how: str) -> None:
    if how == "fifo":
        fifo(planted)
        expected = "is not a regular file but a FIFO"
    else:
        link(planted, "/dev/zero")
        expected = "is a symbolic link"
    assert_refused(run_cli(tmp_path, monkeypatch, argv), f"{planted.name} {expected}")


@pytest.mark.parametrize("how", ["fifo", "/dev/zero"])
@pytest.mark.parametrize(
    "name, argv",
    [
        ("runners.jsonl", ["status"]),
        ("runners.jsonl", ["logs"]),
        ("state.json", ["cancel"]),
        ("settings.json", ["status"]),
        ("logs/runner-10.out", ["logs", "--runner", "1"]),
    ],
)
def test_a_file_chain_reads_that_is_not_a_file_is_refused(
    tmp_path: Path, chain_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str, argv: list[str], how: str
) -> None:
    _cli_read(tmp_path, monkeypatch, argv, chain_dir / name, how)


@pytest.mark.parametrize("how", ["fifo", "/dev/zero"])
def test_the_report_reads_no_fifo_of_job_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.COMPLETED)
    planted = chain_dir / "worker_ids.txt"
    fifo(planted) if how == "fifo" else link(planted, "/dev/zero")
    result = run_cli(tmp_path, monkeypatch, ["report", "--quiet"])
    assert result.exit_code in (0, 2) and "Traceback" not in result.stderr, result.stderr
    with pytest.raises(ChainFileError, match="worker_ids.txt"):
        ChainDir(chain_dir).worker_id_list()


def test_a_linked_runner_log_is_not_printed(tmp_path: Path, chain_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = victim(tmp_path, "secret")
    link(chain_dir / "logs" / "runner-10.out", secret)
    result = run_cli(tmp_path, monkeypatch, ["logs", "--runner", "1"])
    assert_refused(result, "runner-10.out is a symbolic link")
    assert "precious" not in result.stdout


def test_a_linked_logs_directory_is_not_read(tmp_path: Path, chain_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "runner-10.out").write_text("precious\n")
    link(chain_dir / "logs", elsewhere)
    result = run_cli(tmp_path, monkeypatch, ["logs", "--runner", "1"])
    assert_refused(result, ".chain/logs is a symbolic link")
    assert "precious" not in result.stdout


def test_a_fifo_as_the_config_file_or_the_counter_is_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo(tmp_path / "c.toml")
    result = run_cli(tmp_path, monkeypatch, ["submit", "--app-cmd", "true", "--config", "c.toml"])
    assert_refused(result, "config file c.toml is not a regular file but a FIFO")
    link(tmp_path / "z.toml", "/dev/zero")
    result = run_cli(tmp_path, monkeypatch, ["submit", "--app-cmd", "true", "--config", "z.toml"])
    assert_refused(result, "config file z.toml is not a regular file but a character device")
    chain_dir = make_chain(tmp_path / "c", 1, ChainState.RUNNING)
    fifo(chain_dir.parent / "state_iter.txt")
    result = run_cli(chain_dir.parent, monkeypatch, ["status"])
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["fifo", "zero", "deep", "huge"])
def test_a_json_counter_file_that_is_hostile_is_one_checkpoint_error(tmp_path: Path, how: str) -> None:
    from chain.core.settings import Settings
    from chain.errors import CheckpointError
    from chain.store.counter import read_chain_counter

    path = tmp_path / "trainer_state.json"
    if how == "fifo":
        fifo(path)
    elif how == "zero":
        link(path, "/dev/zero")
    elif how == "deep":
        path.write_text('{"global_step": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        path.write_text('{"global_step": ' + "9" * 5000 + "}")
    settings = Settings(app_cmd="true", counter_cmd="json:trainer_state.json:global_step")
    with pytest.raises(CheckpointError, match="--counter-cmd json:trainer_state.json:global_step"):
        read_chain_counter(settings, tmp_path)


def test_a_counter_that_is_not_a_file_is_a_checkpoint_error(tmp_path: Path) -> None:
    from chain.errors import CheckpointError
    from chain.store import read_counter

    with pytest.raises(CheckpointError, match="is not a regular file but a FIFO"):
        read_counter(fifo(tmp_path / "state_iter.txt"))


# --- the guard itself ----------------------------------------------------------------------


def test_names_stay_inside_the_chain_directory(tmp_path: Path, chain_dir: Path) -> None:
    victim(tmp_path)
    guard = Guarded(chain_dir)
    for rel in ("../victim", "runners/../../victim", "/victim", "a//b", "."):
        with pytest.raises(ChainFileError, match="not a name inside the chain directory"):
            guard.read_bytes(rel, 100)
    with pytest.raises(ChainFileError, match="not a name inside"):
        ChainDir(chain_dir).runner_output("../../victim")


def test_each_kind_of_file_is_read_up_to_its_cap(tmp_path: Path, chain_dir: Path) -> None:
    guard = Guarded(chain_dir)
    (chain_dir / "state.json").write_bytes(b" " * (1 << 20) + b"{}")
    with pytest.raises(ChainFileError, match=r"state.json is 1.0 MiB, more than the 1.0 MiB chain reads of it"):
        ChainDir(chain_dir).load_status()
    (chain_dir / "big").write_bytes(b"x" * 5000)
    assert guard.tail("big", 100) == (b"x" * 100, 4900)


def test_an_over_long_runners_line_is_skipped(chain_dir: Path) -> None:
    chain = ChainDir(chain_dir)
    with (chain_dir / "runners.jsonl").open("a") as fh:
        fh.write('{"job_id": "11", "reason": "' + "x" * (1 << 17) + '"}\n')
    chain.append_runner(JudgedRunner(job_id="12", seq=3))
    assert [r.job_id for r in chain.iter_runners()] == ["10", "12"]
    assert chain.last_runner().job_id == "12"  # type: ignore[union-attr]


def test_a_directory_of_another_user_is_refused(tmp_path: Path, chain_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory away")
    os.chown(chain_dir / "logs", 12345, 12345)
    with pytest.raises(ChainFileError, match=r"logs belongs to another user \(uid 12345\)"):
        ChainDir(chain_dir).runner_output("10")
    with pytest.raises(ChainFileError, match=r"logs belongs to another user \(uid 12345\)"):
        Guarded(chain_dir).read_bytes("logs/runner-10.out", 10)


def test_the_guarded_error_is_a_chain_error_and_an_os_error(tmp_path: Path, chain_dir: Path) -> None:
    """Commands say it in one line (exit 2); the jobs' writes fail on it as on
    a file system that refuses them (their OSError path)."""
    from chain.errors import ChainDirError

    fifo(chain_dir / "chain.log")
    with pytest.raises(ChainFileError) as caught:
        Guarded(chain_dir).append("chain.log", b"x\n")
    assert isinstance(caught.value, ChainDirError) and isinstance(caught.value, OSError)
    assert caught.value.exit_code == 2 and caught.value.errno is None
