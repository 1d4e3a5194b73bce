"""``chain status`` and ``Chain.status()`` (``chain.api.status``) only read: the chain
directory is byte-identical after them, for a running relay chain, an ended
one and one whose jobs were scancelled outside chain; the last is reported
("cancelled outside chain"), never settled, and watchers stop on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeBackend
from typer.testing import CliRunner

from chain import Chain, api
from chain.cli import app
from chain.core.model import ChainState, JobState
from chain.core.records import RunnerPhase, RunnerRecord
from chain.errors import ChainError, SchedulerError
from chain.jobs.relay import Relay
from chain.primitives.codes import CliExit
from chain.store import ChainDir


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _relay_chain(tmp_path: Path, fake: FakeBackend) -> ChainDir:
    settings = {"app_cmd": "true", "max_iter": 10, "mode": "relay"}
    api.submit(settings, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, backend=fake)
    return ChainDir(tmp_path / ".chain")


def _running(tmp_path: Path, fake: FakeBackend) -> ChainDir:
    chain = _relay_chain(tmp_path, fake)
    Relay(chain, api.stored_settings(chain), fake, tmp_path, "101", 1, sleep=lambda s: None).take_over()
    chain.write_runner_record(RunnerRecord("101", "x.r1", seq=1, status=RunnerPhase.RUNNING, start=1.0))
    fake.set_state("101", JobState.RUNNING)
    return chain


def _scancelled(tmp_path: Path, fake: FakeBackend) -> ChainDir:
    chain = _running(tmp_path, fake)
    fake.cancel("102")  # the queued successor, then the runner: nothing of the chain is left
    fake.set_state("101", JobState.CANCELLED)
    return chain


def _ended(tmp_path: Path, fake: FakeBackend) -> ChainDir:
    chain = _running(tmp_path, fake)
    api.cancel(tmp_path / ".chain", backend=fake, wait=0)
    return chain


def _status_both_ways(tmp_path: Path, fake: FakeBackend) -> None:
    api.status_report(tmp_path / ".chain", backend=fake)
    Chain.open(tmp_path, backend=fake).status()


@pytest.mark.parametrize("make", [_running, _ended, _scancelled], ids=["running", "ended", "scancelled"])
def test_status_leaves_the_chain_directory_byte_identical(tmp_path: Path, make: object) -> None:
    fake = FakeBackend()
    chain = make(tmp_path, fake)  # type: ignore[operator]
    before = _snapshot(chain.root)
    cancelled = list(fake.cancelled)
    _status_both_ways(tmp_path, fake)
    assert _snapshot(chain.root) == before
    assert fake.cancelled == cancelled and len(fake.submitted) == 2  # no job cancelled or submitted


def test_a_scancelled_relay_is_reported_not_settled(tmp_path: Path) -> None:
    fake = FakeBackend()
    _scancelled(tmp_path, fake)
    report = api.status_report(tmp_path / ".chain", backend=fake)
    assert report.state is ChainState.RUNNING and report.cancelled_outside == (
        "runner job 102 was cancelled outside chain (scancel)"
    )
    with pytest.raises(ChainError, match="cancelled outside chain.*chain cancel closes it"):
        Chain.open(tmp_path, backend=fake).wait(sleep=lambda s: pytest.fail("waited on a chain nothing drives"))


def test_the_watch_ends_on_a_scancelled_relay_and_chain_cancel_closes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend()
    _scancelled(tmp_path, fake)
    monkeypatch.setattr(
        "chain.api.status._ask_scheduler",
        lambda status, chain_dir, backend, fresh_for=0.0: (
            fake.query([j for j in (status.runner_job_id, status.next_job_id) if j]),
            "",
            fake,
        ),
    )
    result = CliRunner().invoke(app, ["status", "--watch", "--chain-dir", str(tmp_path / ".chain")])
    assert result.exit_code == ChainState.CANCELLED.exit_code, result.output
    assert "cancelled outside chain: runner job 102" in result.output and "chain cancel" in result.output
    api.cancel(tmp_path / ".chain", backend=fake, wait=0)
    report = api.status_report(tmp_path / ".chain", backend=fake)
    assert report.state is ChainState.CANCELLED and report.cancelled_outside == ""


def test_waiting_stops_on_a_chain_whose_jobs_slurm_failed_before_they_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both jobs of a new relay chain FAILED (0:53) with no log: nothing of it
    will run, so Chain.wait and chain status --watch stop (exit 4) where they
    waited for ever; with the runner's log present (it started), they wait."""
    fake = FakeBackend()
    _relay_chain(tmp_path, fake)
    for job in ("101", "102"):
        fake.set_state(job, JobState.FAILED, 0)
    report = api.status_report(tmp_path / ".chain", backend=fake)
    assert report.never_started == ["101", "102"] and report.cannot_start
    with pytest.raises(
        SchedulerError, match="jobs 101, 102 failed before chain started in them and nothing of it runs.*--resume"
    ):
        Chain.open(tmp_path, backend=fake).wait(sleep=lambda s: pytest.fail("waited on a chain that cannot start"))
    monkeypatch.setattr(
        "chain.api.status._ask_scheduler",
        lambda status, chain_dir, backend, fresh_for=0.0: (fake.query(status.live_jobs()), "", fake),
    )
    result = CliRunner().invoke(app, ["status", "--watch", "--chain-dir", str(tmp_path / ".chain")])
    assert result.exit_code == CliExit.SCHEDULER, result.output
    assert "jobs 101, 102 failed before chain started in them" in result.output
    ChainDir(tmp_path / ".chain").runner_output("101").write_text("started\n")
    report = api.status_report(tmp_path / ".chain", backend=fake)
    assert report.never_started == ["102"] and report.cannot_start  # 102 never ran; nothing of it runs
    fake.set_state("102", JobState.PENDING)
    assert not api.status_report(tmp_path / ".chain", backend=fake).cannot_start


def test_while_chain_cancel_is_at_work_nothing_is_cancelled_outside(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain = _scancelled(tmp_path, fake)
    chain.cancel_file.write_text("1\n")  # chain cancel's own cancels, its end not yet saved
    assert api.status_report(tmp_path / ".chain", backend=fake).cancelled_outside == ""
