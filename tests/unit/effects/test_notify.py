"""The end of a chain is announced once (``chain.effects.notify``): each
``--notify`` command with the chain's final facts in its environment, and
one mail job with ``--mail-user``; never twice for one end, again for the
end of a resumed run. End to end: tests/e2e/test_notify_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeBackend

from chain import api
from chain.core.model import ChainState, JobState
from chain.core.names import MAIL_SCRIPT
from chain.core.resolution import resolve
from chain.effects.ending import complete_chain, end_chain, mark_cancelled
from chain.effects.executor import Executor
from chain.effects.notify import announce_end
from chain.errors import ConfigError
from chain.store import ChainDir, ChainStatus

ENV_DUMP = 'echo "$CHAIN_ID|$CHAIN_STATE|$CHAIN_REASON|$CHAIN_DIR|$CHAIN_ITERATION|$MAX_ITER" >> {out}'


def _chain(tmp_path: Path, fake: FakeBackend, **flags: object) -> tuple[ChainDir, ChainStatus]:
    api.submit(
        {"app_cmd": "true", "max_iter": 10, **flags},
        {},
        config=None,
        chain_dir=tmp_path / ".chain",
        workdir=tmp_path,
        backend=fake,
    )
    chain = ChainDir(tmp_path / ".chain")
    status = chain.load_status()
    assert status is not None
    return chain, status


def test_each_notify_command_runs_once_per_end_with_the_final_facts(tmp_path: Path) -> None:
    out = tmp_path / "notified.txt"
    fake = FakeBackend()
    chain, status = _chain(tmp_path, fake, notify=[ENV_DUMP.format(out=out), f"echo second >> {out}"])
    settings = api.stored_settings(chain)
    status.state, status.reason, status.iteration = ChainState.FAILED, "app exited 3", 4
    chain.save_status(status)
    announce_end(Executor(chain, fake), status, settings, tmp_path)
    announce_end(Executor(chain, fake), status, settings, tmp_path)  # a restarted submitter, a second status
    again = chain.load_status()
    assert again is not None
    announce_end(Executor(chain, fake), again, settings, tmp_path)
    assert out.read_text().splitlines() == [f"{status.chain_id}|failed|app exited 3|{chain.root}|4|10", "second"]


def test_a_running_chain_is_not_announced(tmp_path: Path) -> None:
    out = tmp_path / "notified.txt"
    fake = FakeBackend()
    chain, status = _chain(tmp_path, fake, notify=[f"touch {out}"])
    announce_end(Executor(chain, fake), status, api.stored_settings(chain), tmp_path)
    assert not out.exists()


def test_a_resumed_chain_announces_its_next_end(tmp_path: Path) -> None:
    out = tmp_path / "notified.txt"
    fake = FakeBackend()
    chain, status = _chain(tmp_path, fake, notify=[f"echo $CHAIN_STATE >> {out}"])
    status.state = ChainState.CANCELLED
    chain.save_status(status)
    announce_end(Executor(chain, fake), status, api.stored_settings(chain), tmp_path)
    fake.set_state(status.submitter_job_id, JobState.CANCELLED)
    fake.set_state(status.runner_job_id, JobState.CANCELLED)
    api.submit({}, {}, config=None, chain_dir=chain.root, workdir=tmp_path, resume=True, backend=fake)
    resumed = chain.load_status()
    assert resumed is not None and not resumed.end_announced
    resumed.state = ChainState.COMPLETED
    chain.save_status(resumed)
    announce_end(Executor(chain, fake), resumed, api.stored_settings(chain), tmp_path)
    assert out.read_text().splitlines() == ["cancelled", "completed"]


def test_mail_user_submits_one_mail_job_named_for_the_final_state(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, status = _chain(tmp_path, fake, mail_user="ada@example.org")
    assert "--mail-type=END" in (chain.scripts / MAIL_SCRIPT).read_text()
    submitted = len(fake.submitted)
    status.state = ChainState.STOPPED
    chain.save_status(status)
    announce_end(Executor(chain, fake), status, api.stored_settings(chain), tmp_path)
    announce_end(Executor(chain, fake), status, api.stored_settings(chain), tmp_path)
    assert fake.submitted[submitted:] == [(f"{status.chain_id}.stopped", None)]


def test_a_failing_notify_command_is_logged_not_raised(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, status = _chain(tmp_path, fake, notify=["exit 7"])
    status.state = ChainState.COMPLETED
    announce_end(Executor(chain, fake), status, api.stored_settings(chain), tmp_path)
    assert "notify-1: FAILED (exit 7" in chain.log_file.read_text()


@pytest.mark.parametrize("bad", ["ada@x.org bob@y.org", "a;b", "x\ny"])
def test_a_mail_user_that_is_not_one_address_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="one mail address|single line"):
        resolve({"app_cmd": "x", "mail_user": bad}, {}, {})


def test_notify_comes_from_the_environment_and_toml_as_a_list() -> None:
    assert resolve({"app_cmd": "x"}, {"CHAIN_NOTIFY": "a;;b"}, {}).notify == ("a", "b")
    assert resolve({"app_cmd": "x"}, {}, {"notify": ["c"]}).notify == ("c",)


@pytest.mark.parametrize("ending", ["complete", "fail", "cancel"])
def test_the_end_is_saved_after_it_was_announced(tmp_path: Path, ending: str) -> None:
    """A watcher that sees the chain ended finds the notify commands run (CI
    once saw `completed` before the notify command had written its file)."""
    fake = FakeBackend()
    seen = tmp_path / "seen.json"
    copy = f"cp {tmp_path / '.chain' / 'state.json'} {seen}"
    chain, status = _chain(tmp_path, fake, notify=[f"{copy}; echo $CHAIN_STATE > told"])
    settings = api.stored_settings(chain)
    if ending == "complete":
        complete_chain(Executor(chain, fake), status, settings, tmp_path, now=0.0)
    elif ending == "fail":
        end_chain(Executor(chain, fake), status, settings, tmp_path, ChainState.FAILED, "app exited 3")
    else:
        mark_cancelled(Executor(chain, fake), status, "chain cancel", settings=settings)
    expected = {"complete": "completed", "fail": "failed", "cancel": "cancelled"}[ending]
    assert (tmp_path / "told").read_text() == f"{expected}\n"
    assert json.loads(seen.read_text())["state"] == "pending"  # not yet ended while it ran
    final = chain.load_status()
    assert final is not None and final.state.value == expected and final.end_announced


def test_a_chain_whose_app_went_past_max_iter_completes_saying_so(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, status = _chain(tmp_path, fake)
    status.iteration = 80  # the app ignored MAX_ITER=10 and ran on
    complete_chain(Executor(chain, fake), status, api.stored_settings(chain), tmp_path, now=0.0)
    final = chain.load_status()
    assert final is not None and final.state is ChainState.COMPLETED
    assert final.reason == "reached MAX_ITER=10; the counter went past MAX_ITER to 80 (the app ignored MAX_ITER)"
