"""The modes' drivers (``chain.modes``): one per ``--mode``, chosen once from
the settings; the rest of chain asks the driver, never which mode it is. A
new mode is one new module and one registration line: a stub mode whose
every hook raises is reached through each of chain's paths."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from fakes import FakeBackend

from chain import modes
from chain.api.status import stranded
from chain.backends.base import Backend, JobInfo, JobState
from chain.core.limits import JobNeeds
from chain.core.model import ChainState
from chain.core.settings import Mode, Settings
from chain.effects.executor import Executor
from chain.modes import DRIVERS, ModeDriver, RunnerJob, driver, least_needs
from chain.store import ChainDir, ChainStatus

CHAIN = Path(__file__).resolve().parents[3] / "chain"


def test_every_mode_has_its_driver() -> None:
    assert set(DRIVERS) == set(Mode)
    for mode in Mode:
        assert driver(mode).mode is mode
    assert driver(Mode.SUBMITTER).has_submitter and not driver(Mode.RELAY).has_submitter
    assert (driver(Mode.SUBMITTER).job_kind, driver(Mode.RELAY).job_kind) == ("submitter", "runner")


def test_no_code_outside_the_drivers_and_the_settings_asks_which_mode_it_is() -> None:
    asks = re.compile(
        r"(\bis|\bis not|==|!=|\bin) *\(?(\bMode)\.(RELAY|SUBMITTER)|\bMode\.(RELAY|SUBMITTER) *(\bis\b|==|!=)"
        r"|[!=]= *[\"'](relay|submitter)[\"']"
    )
    found = [
        f"{path.relative_to(CHAIN)}:{n}: {line.strip()}"
        for path in sorted(CHAIN.rglob("*.py"))
        if path.parent.name != "modes" and path.name != "settings.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if asks.search(line)
    ]
    assert found == []


def _status(**fields: Any) -> ChainStatus:
    return replace(ChainStatus(chain_id="demo-abc123", state=ChainState.RUNNING), **fields)


def _jobs(**states: JobState) -> dict[str, JobInfo]:
    return {job: JobInfo(job, state) for job, state in states.items()}


@pytest.mark.parametrize(
    ("mode", "status", "jobs", "why"),
    [
        (Mode.SUBMITTER, _status(submitter_job_id="7"), _jobs(**{"7": JobState.RUNNING}), ""),
        (Mode.SUBMITTER, _status(submitter_job_id="7"), _jobs(**{"7": JobState.FAILED}), "its submitter job has ended"),
        (Mode.SUBMITTER, _status(submitter_job_id="7"), {}, "its submitter job has ended"),
        (Mode.SUBMITTER, _status(), {}, ""),  # not queued yet
        (Mode.RELAY, _status(runner_job_id="8", runner_live=True), _jobs(**{"8": JobState.RUNNING}), ""),
        (Mode.RELAY, _status(next_job_id="9"), _jobs(**{"9": JobState.PENDING}), ""),
        (Mode.RELAY, _status(runner_job_id="8"), {}, "nothing of it runs or is queued"),
        (
            Mode.RELAY,
            _status(next_job_id="9"),
            _jobs(**{"9": JobState.CANCELLED}),
            "runner job 9 was cancelled outside chain",
        ),
    ],
)
def test_each_driver_says_when_nothing_drives_its_chain(
    mode: Mode, status: ChainStatus, jobs: Mapping[str, JobInfo], why: str
) -> None:
    got = stranded(status, jobs, mode=mode)
    assert got.startswith(why) if why else got == ""
    assert stranded(status, jobs, mode=mode, cancelling=True) == ""  # chain cancel's own doing
    assert stranded(_status(state=ChainState.CANCELLED, **_plain(status)), jobs, mode=mode) == ""


def _plain(status: ChainStatus) -> dict[str, Any]:
    return {k: getattr(status, k) for k in ("submitter_job_id", "runner_job_id", "runner_live", "next_job_id")}


def test_the_mode_that_queues_fewest_is_the_one_a_tight_limit_names() -> None:
    assert least_needs().mode == "relay" and least_needs().queued == 2


class StubMode(ModeDriver):
    """A newcomer's third mode, before any of it is written."""

    mode = cast(Mode, "stub")  # a new Mode member, in the real change
    has_submitter = False

    def needs(self, lookahead: bool) -> JobNeeds:
        raise NotImplementedError("needs")

    def start(self, run: Executor, status: ChainStatus, settings: Settings, workdir: Path) -> str:
        raise NotImplementedError("start")

    def refuse_resume(self, backend: Backend, status: ChainStatus, notify: Callable[[str], None] | None) -> None:
        raise NotImplementedError("refuse_resume")

    def run_runner(self, job: RunnerJob) -> int:
        raise NotImplementedError("run_runner")

    def stranded(self, status: ChainStatus, jobs: Mapping[str, JobInfo], cancelling: bool) -> str:
        raise NotImplementedError("stranded")


def test_a_new_mode_is_one_module_and_one_registration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stub = StubMode()
    monkeypatch.setitem(modes.DRIVERS, stub.mode, stub)  # the registration line
    assert driver(stub.mode) is stub
    with pytest.raises(NotImplementedError, match="stranded"):
        stranded(_status(), {}, mode=stub.mode)
    with pytest.raises(NotImplementedError, match="needs"):
        least_needs()
    # the runner job's path goes through the driver too
    from chain.jobs import runner

    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = cast(Settings, type("S", (), {"mode": stub.mode})())
    monkeypatch.setattr(ChainDir, "runner_record", lambda self, job_id, lenient=False: None)
    with pytest.raises(NotImplementedError, match="run_runner"):
        runner.run(chain, settings, FakeBackend(), job_id="5", job_name="demo-abc123.r1", workdir=tmp_path)


@pytest.mark.parametrize(
    ("fields", "runners", "live"),
    [
        (
            {"submitter_job_id": "7", "runner_job_id": "8", "runner_live": True, "next_job_id": "9"},
            ["8", "9"],
            ["7", "8", "9"],
        ),
        ({"submitter_job_id": "7", "runner_job_id": "8", "runner_live": False}, [], ["7"]),  # judged: not asked about
        ({"runner_job_id": "", "runner_live": True, "next_job_id": "9"}, ["9"], ["9"]),  # sbatch had not returned
        ({}, [], []),
    ],
)
def test_the_one_list_of_a_chains_live_jobs(fields: dict[str, Any], runners: list[str], live: list[str]) -> None:
    status = _status(**fields)
    assert status.runner_jobs() == runners and status.live_jobs() == live
