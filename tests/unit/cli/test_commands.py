"""The CLI through typer's CliRunner: help, version, render, status on a
chain directory made by the library's own classes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _chains import make_chain
from typer.testing import CliRunner

from chain import __version__
from chain.cli.commands import app
from chain.core.decision import Verdict
from chain.core.model import ChainState, JobState
from chain.store import ChainDir

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("submit", "status", "render", "cancel", "report", "shell-helpers"):
        assert command in result.stdout


def test_submit_help_has_the_required_flags() -> None:
    out = runner.invoke(app, ["submit", "--help"], env={"COLUMNS": "200"}).stdout
    for flag in (
        "--max-iter",
        "--app-cmd",
        "--ckpt-path",
        "--checkpoint-every",
        "--runner-time",
        "--runner-margin",
        "--submitter-time",
        "--submitter-margin",
        "--launch-mode",
        "--srun-args",
        "--modules",
        "--stop-signal",
        "--partition",
        "--chain-dir",
        "--config",
        "--backend",
        "--resume",
    ):
        assert flag in out, flag


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"chain {__version__}"


def test_render_prints_both_scripts_that_pass_bash_n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["render", "--app-cmd", "python3 app.py", "--max-iter", "7"])
    assert result.exit_code == 0, result.stderr
    assert "# ---- submitter.sbatch ----" in result.stdout and "# ---- runner.sbatch ----" in result.stdout
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", "--app-cmd", "python3 app.py", "--out", str(out)])
    assert result.exit_code == 0
    for name in ("submitter.sbatch", "runner.sbatch"):
        assert subprocess.run(["bash", "-n", str(out / name)], check=False).returncode == 0
    assert not (tmp_path / ".chain").exists(), "render must not create a chain"


def test_render_takes_chain_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chain.toml").write_text('app_cmd = "x"\npartition = "long"\nrunner_time = "1-00:00:00"\n')
    result = runner.invoke(app, ["render"])
    assert "#SBATCH --partition=long" in result.stdout and "#SBATCH --time=1-00:00:00" in result.stdout


def _chain_dir(tmp_path: Path, runners: int, state: ChainState) -> Path:
    made: Path = make_chain(tmp_path, runners, state, first=0, max_iter=100)  # _chains is untyped to mypy here
    return made


def test_status_json_has_the_documented_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _chain_dir(tmp_path, 3, ChainState.COMPLETED)
    result = runner.invoke(app, ["status", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    for key in (
        "chain_id",
        "state",
        "iteration",
        "max_iter",
        "submitter_cycle",
        "submitter_job_id",
        "reason",
        "runners",
    ):
        assert key in data
    assert data["state"] == "completed" and data["iteration"] == 30 and len(data["runners"]) == 3
    # the runners table's keys, in order, as before the judged line was one type (not its lost-work facts)
    assert list(data["runners"][0]) == [
        "job_id",
        "seq",
        "state",
        "exit_code",
        "iter_before",
        "iter_after",
        "verdict",
        "reason",
        "start",
        "end",
        "kind",  # the reason's kind, added after the keys as they were
    ]
    # an ended chain shows no rate or ETA; a running one does
    assert data["metrics"]["rate_per_hour"] is None and data["metrics"]["eta_seconds"] is None
    assert data["metrics"]["efficiency"] is not None
    short = json.loads(runner.invoke(app, ["status", "--json", "--history", "2"]).stdout)
    assert [r["job_id"] for r in short["runners"]] == [r["job_id"] for r in data["runners"][-2:]]
    assert short["runner_count"] == 3 and short["metrics"] == data["metrics"]
    bad = runner.invoke(app, ["status", "--history", "-1"])
    assert bad.exit_code == 2 and "Traceback" not in bad.stdout + bad.stderr


def test_status_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _chain_dir(tmp_path, 6, ChainState.RUNNING)
    data = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert data["metrics"]["rate_per_hour"] > 0 and data["metrics"]["eta_seconds"] > 0
    result = runner.invoke(app, ["status", "--history", "5"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.stderr
    assert "rate " in result.stdout and "ETA " in result.stdout
    assert "chain-abcdef" in result.stdout and "running" in result.stdout
    assert "60/100 (60%)" in result.stdout
    assert "runners (last 5 of 6)" in result.stdout
    assert "50->60" in result.stdout and "0->10" not in result.stdout


def test_status_watch_honours_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ended chain: --watch prints the final view once, with --history rows."""
    monkeypatch.chdir(tmp_path)
    _chain_dir(tmp_path, 6, ChainState.COMPLETED)
    result = runner.invoke(app, ["status", "--watch", "--history", "3"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.stderr
    assert "runners (last 3 of 6)" in result.stdout and "20->30" not in result.stdout


def test_shell_helpers_dir_exists() -> None:
    result = runner.invoke(app, ["shell-helpers"])
    path = Path(result.stdout.strip())
    assert (path / "chain.sh").is_file() and (path / "chain.R").is_file()


def test_status_says_when_nothing_drives_the_chain() -> None:
    import io

    from rich.console import Console

    from chain.api.status import StatusReport
    from chain.cli.status_view import print_status

    report = StatusReport(
        chain_id="c-1",
        state=ChainState.RUNNING,
        backend="slurm",
        iteration=5,
        max_iter=10,
        submitter_cycle=2,
        submitter_job_id="41",
        submitter_state="FAILED",
        log="x",
    )
    assert report.submitter_lost
    assert not dataclasses.replace(report, submitter_state="RUNNING").submitter_lost
    assert not dataclasses.replace(report, submitter_state="PENDING").submitter_lost
    assert not dataclasses.replace(report, state=ChainState.COMPLETED).submitter_lost
    buf = io.StringIO()
    print_status(report, console=Console(file=buf, width=200))
    assert "chain submit --resume" in buf.getvalue()


def test_status_prints_the_chains_text_literally(capsys: pytest.CaptureFixture[str]) -> None:
    """Reasons and paths come from apps and users: brackets and :name: are
    not rich markup or emoji codes."""
    from chain.api.status import StatusReport
    from chain.cli.status_view import print_status
    from chain.core.records import JudgedRunner

    reason = "app exited 3: [bold]oops[/] :smile: [/bad]"
    report = StatusReport(
        chain_id="c-[x]:smile:",
        state=ChainState.FAILED,
        backend="slurm",
        iteration=5,
        max_iter=10,
        reason=reason,
        submitter_cycle=1,
        submitter_job_id="41",
        log="/d/[log]/chain.log",
        runners=[
            JudgedRunner(
                seq=1,
                job_id="42",
                state=JobState.FAILED,
                exit_code=3,
                iter_before=0,
                iter_after=5,
                verdict=Verdict.STOP,
                reason="[red]no[/red]",
            )
        ],
        hooks=[{"name": "[h]", "rc": 1, "log": "l"}],
    )
    print_status(report)  # its own console, as chain status makes it
    text = capsys.readouterr().out
    assert f"reason: {reason}" in text
    assert "chain c-[x]:smile:" in text and "log: /d/[log]/chain.log" in text
    assert "stop: [red]no[/red]" in text and "hook [h]: failed (exit 1)" in text
    assert "FAILED" in text and "JobState" not in text  # the enums are shown as their words


@pytest.mark.parametrize("state", [ChainState.COMPLETED, ChainState.FAILED, ChainState.STOPPED, ChainState.CANCELLED])
def test_watch_exits_with_the_final_states_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: ChainState
) -> None:
    """0 only for a completed chain; each other end state its own code (README)."""
    monkeypatch.chdir(tmp_path)
    _chain_dir(tmp_path, 2, state)
    result = runner.invoke(app, ["status", "--watch"], env={"COLUMNS": "160"})
    assert result.exit_code == {"completed": 0, "failed": 10, "stopped": 11, "cancelled": 12}[state.value]
    assert state.value in result.stdout


def test_status_of_a_failed_chain_shows_the_failing_runners_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    chain_dir = _chain_dir(tmp_path, 2, ChainState.FAILED)
    out = ChainDir(chain_dir).runner_output("11")
    out.write_text("".join(f"line {i}\n" for i in range(40)) + "ModuleNotFoundError: No module named 'x'\n")
    result = runner.invoke(app, ["status"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.stderr
    assert str(out) in result.stdout and "ModuleNotFoundError: No module named 'x'" in result.stdout
    assert "line 39" in result.stdout and "line 20" not in result.stdout  # only the tail
    data = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert data["failure"]["job_id"] == "11" and data["failure"]["tail"][-1].startswith("ModuleNotFoundError")


def test_status_says_nothing_drives_a_chain_whose_submitter_the_scheduler_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running chain whose submitter job id the backend does not know."""
    monkeypatch.chdir(tmp_path)
    chain_dir = _chain_dir(tmp_path, 2, ChainState.RUNNING)
    chain = ChainDir(chain_dir)
    status = chain.load_status()
    assert status is not None
    status.submitter_job_id = "999999"
    chain.save_status(status)
    data = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert data["nothing_driving"] is True
    result = runner.invoke(app, ["status"], env={"COLUMNS": "200"})
    assert "nothing drives it" in result.stdout and "chain submit --resume" in result.stdout


def test_status_names_the_jobs_slurm_failed_before_chain_started_in_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slurm opens a job's log before any of it runs: a FAILED job with no
    log never ran chain (a chain directory the nodes cannot write, exit
    0:53). A FAILED job with its log, or one merely pending, is not named."""
    from fakes import FakeBackend

    from chain.backends import BACKENDS

    monkeypatch.chdir(tmp_path)
    chain = ChainDir(_chain_dir(tmp_path, 1, ChainState.PENDING))
    status = chain.load_status()
    assert status is not None
    status.submitter_job_id, status.runner_job_id, status.runner_live, status.next_job_id = "20", "21", True, "22"
    status.backend = "slurm"  # the advice names sacct (not on the local backend)
    chain.save_status(status)
    fake = FakeBackend()
    fake.set_state("20", JobState.FAILED, 0)  # sacct's 0:53
    fake.set_state("21", JobState.FAILED)  # its exit status not known
    fake.set_state("22", JobState.PENDING)

    def make(chain_dir: Path, retry: object = None) -> FakeBackend:
        return fake

    monkeypatch.setitem(BACKENDS, "slurm", make)
    data = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert data["never_started"] == ["20", "21"]
    result = runner.invoke(app, ["status"], env={"COLUMNS": "300"})
    assert "jobs 20, 21 failed before chain started in them (no log)" in result.stdout, result.stdout
    assert "sacct -j 20,21 -o ExitCode" in result.stdout
    fake.set_state("21", JobState.FAILED, 1)  # its script ran and exited 1: it started (its log elsewhere)
    assert json.loads(runner.invoke(app, ["status", "--json"]).stdout)["never_started"] == ["20"]
    fake.set_state("21", JobState.FAILED)
    chain.runner_output("21").write_text("Traceback ...\n")
    assert json.loads(runner.invoke(app, ["status", "--json"]).stdout)["never_started"] == ["20"]
    chain.submitter_output("20").write_text("")
    data = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert data["never_started"] == []
    assert "failed before chain started" not in runner.invoke(app, ["status"], env={"COLUMNS": "300"}).stdout


@pytest.mark.parametrize("command", ["submit", "render"])
def test_every_setting_is_an_option_with_its_type_default_and_environment(command: str) -> None:
    from chain.core.fields import FIELDS

    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).stdout
    blocks: dict[str, str] = {}  # an option's help, wrapped lines joined
    for ln in out.splitlines():
        if ln.startswith("  -"):
            key = ln.split()[0]
            blocks[key] = ln
        elif blocks and ln.startswith("    "):
            blocks[key] += " " + ln.strip()
    for spec in FIELDS:
        line = blocks.get(spec.option, "")
        assert line, f"{spec.option} missing from chain {command} --help"
        assert f"env {spec.env};" in line and f"toml {spec.name};" in line and "default " in line, line
        if spec.metavar not in ("BOOL",):
            assert spec.metavar.rstrip(".") in line, line


def test_shell_completion_is_offered() -> None:
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    assert "--install-completion" in out
    script = subprocess.run(
        [sys.executable, "-m", "chain", "--show-completion", "bash"],
        check=False,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SHELL": "/bin/bash"},
        timeout=60,
    )
    assert script.returncode == 0 and "complete" in script.stdout and "_CHAIN_COMPLETE" in script.stdout


def test_render_of_a_stored_chain_uses_its_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a directory holding a chain, render shows that chain's scripts
    (stored settings and id); flags change them, the environment does not."""
    monkeypatch.chdir(tmp_path)
    _chain_dir(tmp_path, 2, ChainState.STOPPED)
    result = runner.invoke(app, ["render"], env={"CHAIN_PARTITION": "elsewhere"})
    assert result.exit_code == 0, result.stderr
    assert "chain-abcdef" in result.stdout and "xxxxxx" not in result.stdout
    assert "--partition" not in result.stdout  # stored: none
    assert "not applied on resume: CHAIN_PARTITION" in result.stderr
    changed = runner.invoke(app, ["render", "--max-iter", "321", "--partition", "gpu"])
    assert "MAX_ITER=321" in changed.stdout and "#SBATCH --partition=gpu" in changed.stdout
    fresh = runner.invoke(app, ["render", "--app-cmd", "x", "--chain-dir", str(tmp_path / "other")])
    assert "chain-xxxxxx" in fresh.stdout


def test_progress_line_numbers_the_current_runner_past_every_judged_one() -> None:
    """Not past the rows kept by --history (seen: "runner 11" with 49 judged)."""
    from chain.api.status import StatusReport
    from chain.cli.status_view import progress_line
    from chain.core.records import JudgedRunner, RunnerPhase, RunnerRecord

    report = StatusReport(
        chain_id="c",
        state=ChainState.RUNNING,
        iteration=490,
        max_iter=1000,
        runner_job_id="77",
        runners=[JudgedRunner(job_id=str(i)) for i in range(10)],
        runner_count=49,
    )
    assert "runner 50 (job 77) submitted" in progress_line(report)
    report.current_runner = RunnerRecord("77", seq=50, status=RunnerPhase.RUNNING)
    assert "runner 50 (job 77) running" in progress_line(report)


def test_logs_prints_a_runners_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chain_dir = _chain_dir(tmp_path, 3, ChainState.COMPLETED)  # runners 1..3 are jobs 10..12
    chain = ChainDir(chain_dir)
    for job in ("10", "11", "12"):
        chain.runner_output(job).write_text(f"output of job {job}\n")
    last = runner.invoke(app, ["logs"])
    assert last.exit_code == 0 and last.stdout == "output of job 12\n" and "runner 3 (job 12)" in last.stderr
    second = runner.invoke(app, ["logs", "--runner", "2"])
    assert second.stdout == "output of job 11\n"
    missing = runner.invoke(app, ["logs", "--runner", "9"])
    assert missing.exit_code == 2 and "has no runner 9" in missing.stderr
    followed = runner.invoke(app, ["logs", "--follow"])  # an ended chain: prints and returns
    assert followed.exit_code == 0 and followed.stdout.endswith("output of job 12\n")
