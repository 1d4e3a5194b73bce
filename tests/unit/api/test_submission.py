"""Submitting from the API and the command line, as a new user meets it:
no API keyword shadows a setting, a working directory names its
chain even beside the app's own state.json, a bad counter or a counter
already at MAX_ITER is refused before anything is queued, the command line
is judged before the chain directory, a failed Chain.submit leaves no
directory it made."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend, spy_on_executors
from typer.testing import CliRunner

from chain import Chain, api
from chain.cli.commands import app
from chain.core.fields import FIELD_BY_NAME
from chain.core.model import ChainState, JobState
from chain.errors import ChainDirError, CheckpointError, ConfigError
from chain.store import ChainDir

BASE: dict[str, Any] = {"app_cmd": "true", "max_iter": 10, "runner_time": "10:00"}
CLEAN_ENV = {
    "CHAIN_BACKEND": "local",
    "MAX_ITER": None,
    "APP_CMD": None,
    "RUNNER_TIME_LIMIT": None,
    "RUNNER_MARGIN_SEC": None,
    "CHAIN_DIR": None,
    "CKPT_PATH": None,
}


def _ended(run: Chain, fake: FakeBackend, state: ChainState) -> None:
    store = ChainDir(run.chain_dir)
    status = store.load_status()
    assert status is not None
    status.state = state
    store.save_status(status)
    fake.set_state(status.submitter_job_id, JobState.COMPLETED)


def _cli(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(app, argv, env={**CLEAN_ENV, **env})


# --- item 1: notify is the setting ------------------------------------------------


@pytest.mark.parametrize("method", [Chain.submit, Chain.resume, Chain.open, Chain.wait, Chain.__init__])
def test_no_keyword_of_the_api_shadows_a_setting(method: Any) -> None:
    """Every setting is a keyword by its TOML name: a parameter of the same
    name would take it (``notify`` was the callback, the setting was lost)."""
    params = inspect.signature(method).parameters.values()
    named = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD} - {"self", "cls"}
    # ``backend`` is the setting itself where settings are taken (a string goes to it, a Backend
    # object is used as it is: api/test_handle.py), and takes no setting where none are
    assert not named & set(FIELD_BY_NAME) - {"backend"}, named & set(FIELD_BY_NAME)


def test_backend_given_as_a_string_is_the_stored_setting(tmp_path: Path) -> None:
    run = Chain.submit(tmp_path / "l", backend="local", **BASE)
    try:
        assert json.loads((run.chain_dir / "settings.json").read_text())["backend"] == "local"
    finally:
        run.cancel()


def test_notify_keyword_is_the_setting_and_on_message_gets_the_lines(tmp_path: Path) -> None:
    fake = FakeBackend()
    run = Chain.submit(tmp_path / "w", backend=fake, notify=["echo $CHAIN_STATE >> done"], **BASE)
    stored = json.loads((run.chain_dir / "settings.json").read_text())
    assert stored["notify"] == ["echo $CHAIN_STATE >> done"]
    _ended(run, fake, ChainState.STOPPED)
    lines: list[str] = []
    run.resume(environ={"CHAIN_RETRIES": "7"}, on_message=lines.append, notify=["echo again"])
    stored = json.loads((run.chain_dir / "settings.json").read_text())
    assert stored["notify"] == ["echo again"]
    assert any(line.startswith("not applied on resume: CHAIN_RETRIES") for line in lines), lines


# --- item 2: a working directory with the app's own state.json --------------------------


def _app_state(work: Path) -> None:
    (work / "state.json").write_text(json.dumps({"epoch": 3, "loss": 0.25}))  # the app's checkpoint


def test_open_and_status_of_a_working_directory_beside_the_apps_state_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend()
    work = tmp_path / "w"
    run = Chain.submit(work, backend=fake, **BASE)
    _app_state(work)
    assert Chain.open(work, backend=fake).chain_id == run.chain_id
    _ended(run, fake, ChainState.STOPPED)  # status asks no scheduler then
    result = _cli(["status", "--json", "--chain-dir", str(work)], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["chain_id"] == run.chain_id


@pytest.mark.parametrize("text", [json.dumps({"epoch": 3}), "[1, 2]", "7"])
def test_a_state_json_that_is_not_chains_is_not_called_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    (tmp_path / "state.json").write_text(text)
    with pytest.raises(ChainDirError) as raised:
        Chain.open(tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path} is not a chain directory: its state.json is not chain's"), message
    result = _cli(["status", "--chain-dir", str(tmp_path)], tmp_path, monkeypatch)
    assert result.exit_code == 2 and result.stderr == f"chain: error: {message}\n"
    for python_words in ("positional argument", "__init__", "Expecting"):
        assert python_words not in message


def test_a_chains_state_json_that_is_broken_is_worded_for_a_person(tmp_path: Path) -> None:
    store = ChainDir(tmp_path / ".chain")
    store.create()
    store.state_file.write_text('{"chain_id": "c-1", "state": ')
    with pytest.raises(ChainDirError, match=r"is corrupt: not valid JSON \(line 1: expecting value\)"):
        store.load_status()
    store.state_file.write_text("  \n")
    with pytest.raises(ChainDirError, match="is corrupt: the file is empty"):
        store.load_status()


# --- item 3: an unreadable counter ---------------------------------------------------------


def test_an_unreadable_counter_is_refused_before_anything_is_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "state_iter.txt").write_text("v2 iter 10\n")
    result = _cli(["submit", "--app-cmd", "true"], tmp_path, monkeypatch)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert f"{tmp_path / 'state_iter.txt'}" in result.stderr and "'v2 iter 10'" in result.stderr
    assert "plain integer, the iterations done" in result.stderr
    assert not (tmp_path / ".chain").exists(), "a new chain left a chain directory behind"


def test_an_unreadable_counter_is_refused_on_resume(tmp_path: Path) -> None:
    fake = FakeBackend()
    run = Chain.submit(tmp_path, backend=fake, **BASE)
    _ended(run, fake, ChainState.STOPPED)
    queued = list(fake.submitted)
    (tmp_path / "state_iter.txt").write_text("v2 iter 10\n")
    with pytest.raises(CheckpointError, match="does not hold a plain integer.*repair or remove it"):
        run.resume()
    assert fake.submitted == queued, "a resume on a bad counter queued a job"
    assert run.status().state is ChainState.STOPPED and run.status().submitter_cycle == 0


# --- item 6: the command line before the chain directory ---------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--runner-time", "30", "--runner-margin", "1800"], "runner margin"),
        (["--config", "nope.toml"], "nope.toml"),
        (["--max-iter", "x"], "--max-iter must be an integer"),
    ],
)
@pytest.mark.parametrize("resume", [False, True])
def test_the_command_line_is_judged_before_the_chain_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str, resume: bool
) -> None:
    Chain.submit(tmp_path, backend=FakeBackend(), **BASE)  # an active (pending) chain
    result = _cli(["submit", "--app-cmd", "true", *argv, *(["--resume"] if resume else [])], tmp_path, monkeypatch)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert "active" not in result.stderr


def test_resuming_nothing_still_judges_the_command_line_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _cli(["submit", "--resume", "--config", "nope.toml"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "nope.toml" in result.stderr, result.stderr
    result = _cli(["submit", "--resume"], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "nothing to resume" in result.stderr, result.stderr


# --- item 13: a counter already at MAX_ITER; MAX_ITER on resume ------------------------------


@pytest.mark.parametrize("new", [False, True])
def test_a_new_chain_with_its_counter_at_max_iter_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new: bool
) -> None:
    if new:  # a completed chain, its counter left at MAX_ITER: --new would complete at once
        fake = FakeBackend()
        _ended(Chain.submit(tmp_path, backend=fake, **BASE), fake, ChainState.COMPLETED)
    before = sorted(p.name for p in tmp_path.iterdir())
    (tmp_path / "state_iter.txt").write_text("10\n")
    result = _cli(
        ["submit", "--app-cmd", "true", "--max-iter", "10", *(["--new"] if new else [])], tmp_path, monkeypatch
    )
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1
    assert "already holds 10, and --max-iter is 10: a new chain would have nothing to run" in result.stderr
    assert "raise --max-iter, or remove the counter" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "state_iter.txt"])  # nothing moved


def test_max_iter_from_the_environment_on_resume_of_a_completed_chain_is_said_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend()
    _ended(Chain.submit(tmp_path, backend=fake, **BASE), fake, ChainState.COMPLETED)
    result = _cli(["submit", "--resume"], tmp_path, monkeypatch, MAX_ITER="1000")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert (
        "chain: not applied on resume: MAX_ITER = '1000' differs from the chain's stored 10 "
        "(use --max-iter to change it)"
    ) in lines[:-1], result.stderr
    assert lines[-1].startswith("chain: error: ") and "--resume --max-iter N" in lines[-1]


# --- item 14: a failed Chain.submit leaves no directory it made -----------------------------


def test_a_failed_submit_removes_the_working_directory_it_made(tmp_path: Path) -> None:
    work = tmp_path / "runs" / "lr1"
    with pytest.raises(ConfigError, match="not found on PATH"):
        Chain.submit(work, backend=FakeBackend(), **{**BASE, "app_cmd": "no-such-program-xyz"})
    assert not (tmp_path / "runs").exists()


def test_a_failed_submit_keeps_a_working_directory_that_was_there(tmp_path: Path) -> None:
    work = tmp_path / "mine"
    work.mkdir()
    (work / "data.txt").write_text("precious")
    (work / "state_iter.txt").write_text("garbage")
    with pytest.raises(CheckpointError):
        Chain.submit(work, backend=FakeBackend(), **BASE)
    assert sorted(p.name for p in work.iterdir()) == ["data.txt", "state_iter.txt"]
    assert (work / "data.txt").read_text() == "precious"


def test_an_unknown_program_without_bash_on_path_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app check asks bash whether an unknown word is a builtin: with no
    bash on PATH that is a ConfigError, not an internal error."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ConfigError, match="bash, which runs it, is not on PATH"):
        Chain.submit(tmp_path / "w", backend=FakeBackend(), **{**BASE, "app_cmd": "no-such-program-xyz"})


@pytest.mark.parametrize(
    ("mode", "started"),
    [
        ("submitter", ["RunnerIntended", "RunnerSubmitted", "SuccessorQueued", "SubmitterQueued"]),
        ("relay", ["RelayStarted", "RunnerIntended", "RunnerSubmitted", "SuccessorQueued"]),
    ],
)
def test_a_submits_events_all_go_through_the_one_executor_it_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, started: list[str]
) -> None:
    """Its Prepared, the mode's start and, on resume, its Resumed: one
    executor, with the command's backend."""
    applied = spy_on_executors(monkeypatch)
    fake = FakeBackend()
    flags = {**BASE, "mode": mode, "lookahead": True}
    api.submit(flags, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, backend=fake)
    assert [name for _, name in applied] == ["Prepared", *started]
    assert len({id(run) for run, _ in applied}) == 1 and applied[0][0].backend is fake
    chain = ChainDir(tmp_path / ".chain")
    status = chain.load_status()
    assert status is not None
    status.state, status.runner_live = ChainState.STOPPED, False
    chain.save_status(status)
    for job, _ in enumerate(fake.submitted, start=101):
        fake.set_state(str(job), JobState.COMPLETED)
    applied.clear()
    api.submit({}, {}, config=None, chain_dir=chain.root, workdir=tmp_path, resume=True, backend=fake)
    names = [name for _, name in applied]
    assert names[:3] == ["Resumed", "SuccessorDropped", "Prepared"] and names[3:] == started
    assert len({id(run) for run, _ in applied}) == 1 and applied[0][0].backend is fake
