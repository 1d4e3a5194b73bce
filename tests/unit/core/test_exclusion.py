"""Nodes a chain leaves out: the blame rule (chain.core.exclusion),
strikes kept by the protocol's Judged event, every runner submission passing
``--exclude``, ``chain status`` saying so, ``--resume --reset-excluded``
clearing them, and sinfo's node states read on literal output."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend
from typer.testing import CliRunner

from chain import api
from chain.backends.base import JobInfo
from chain.backends.slurm.parse import down_nodes
from chain.cli.commands import app
from chain.core.decision import Policy, Tally, decide
from chain.core.events import Judged, Resumed, RunnerIntended, RunnerSubmitted
from chain.core.exclusion import asks_node_states, blamed, excluded, struck
from chain.core.model import JobState
from chain.core.protocol import transition
from chain.core.records import RunnerPhase, RunnerRecord
from chain.effects.ending import record_judgment
from chain.effects.executor import Executor
from chain.effects.runners import submit_runner_job
from chain.errors import SchedulerError
from chain.jobs.watch import gather_outcome, with_nodes_down
from chain.store import ChainDir, ChainStatus


def test_a_down_node_is_blamed_before_any_other() -> None:
    assert blamed(["n1", "n2"], {"n2"}, failed=True) == ["n2"]
    assert blamed(["n1"], set(), failed=True) == ["n1"]  # one node: its own
    assert blamed(["n1", "n2"], set(), failed=True) == []  # several, all up: no way to tell
    assert blamed(["n1", "n2"], {"n2"}, failed=False) == []  # a good runner blames nobody
    assert blamed([], {"n2"}, failed=True) == []


def test_a_runner_taken_back_blames_only_a_down_node() -> None:
    assert blamed(["n1", "n2"], {"n2"}, failed=False, taken_back=True) == ["n2"]  # a node failure's requeue
    assert blamed(["n1"], set(), failed=False, taken_back=True) == []  # a preemption: nobody's
    assert asks_node_states(["n1"], failed=False, taken_back=True)
    assert not asks_node_states(["n1"], failed=True, taken_back=False)  # one node failed: its own
    assert asks_node_states(["n1", "n2"], failed=True, taken_back=False)
    assert not asks_node_states(["n1", "n2"], failed=False, taken_back=False)
    assert not asks_node_states([], failed=True, taken_back=True)


def test_two_strikes_exclude_a_node() -> None:
    strikes = struck({}, ["n2", "n2"])  # once per runner, however often named
    assert strikes == {"n2": 1} and excluded(strikes) == []
    strikes = struck(strikes, ["n2", "n3"])
    assert strikes == {"n2": 2, "n3": 1} and excluded(strikes) == ["n2"]


def test_the_protocol_keeps_strikes_and_says_when_a_node_is_excluded() -> None:
    status = ChainStatus(chain_id="c", runner_seq=3, runner_live=True, node_strikes={"n2": 1})
    after, effects = transition(status, Judged(10, 1, 0, job_id="", blamed=("n2",)))
    assert after.node_strikes == {"n2": 2} and status.node_strikes == {"n2": 1}
    assert after.excluded_nodes == ["n2"] and status.excluded_nodes == []
    lines = [getattr(e, "line", "") for e in effects]
    assert any("excluded from the chain's later runners: n2" in line for line in lines), lines
    unchanged, _ = transition(status, Judged(10, 1, 0, job_id=""))
    assert unchanged.node_strikes == {"n2": 1} and unchanged.excluded_nodes == []


def test_exclude_after_is_the_chains_setting() -> None:
    status = ChainStatus(chain_id="c", runner_live=True)
    once, _ = transition(status, Judged(10, 1, 0, job_id="", blamed=("n2",), exclude_after=1))
    assert once.excluded_nodes == ["n2"]
    never, _ = transition(
        ChainStatus(chain_id="c", runner_live=True, node_strikes={"n2": 5}),
        Judged(10, 1, 0, job_id="", blamed=("n2",), exclude_after=0),
    )
    assert never.node_strikes == {"n2": 6} and never.excluded_nodes == []


def test_resume_resets_strikes_only_when_asked() -> None:
    status = ChainStatus(chain_id="c", node_strikes={"n2": 2}, excluded_nodes=["n2"])
    kept, _ = transition(status, Resumed())
    assert kept.node_strikes == {"n2": 2} and kept.excluded_nodes == ["n2"]
    reset, effects = transition(status, Resumed(reset_excluded=True))
    assert reset.node_strikes == {} and reset.excluded_nodes == [] and "n2" in getattr(effects[0], "line", "")


def _chain(tmp_path: Path, fake: FakeBackend) -> tuple[ChainDir, Any, ChainStatus]:
    api.submit(
        {"app_cmd": "true", "max_iter": 10},
        {},
        config=None,
        chain_dir=tmp_path / ".chain",
        workdir=tmp_path,
        backend=fake,
    )
    chain = ChainDir(tmp_path / ".chain")
    status = chain.load_status()
    assert status is not None
    return chain, api.stored_settings(chain), status


def _next_runner(chain: ChainDir, status: ChainStatus, job_id: str) -> None:
    """The next runner submitted, as the jobs do it: the one a judgment may judge now."""
    run = Executor(chain, FakeBackend())
    run.apply(status, RunnerIntended(status.iteration, 0.0))
    run.apply(status, RunnerSubmitted(job_id, 10))


def _judge(
    chain: ChainDir,
    settings: Any,
    status: ChainStatus,
    fake: FakeBackend,
    nodes: list[str],
    *,
    slurm_state: JobState | None = None,
    requeued: bool = False,
    stalled: float | None = None,
    preempted: bool = False,
) -> str:
    """Judge the current runner as the jobs do: its facts gathered (the fake's down nodes), decided,
    recorded. Its reason."""
    record = RunnerRecord(
        status.runner_job_id,
        seq=status.runner_seq,
        status=RunnerPhase.ENDED,
        exit_code=1,
        nodes=nodes,
        iter_before=0,
        iter_after=0,
        stalled=stalled,
        preempted=preempted,
    )
    chain.write_runner_record(record)
    state = JobState.REQUEUED if requeued else slurm_state
    info = JobInfo(status.runner_job_id, state) if state is not None else None
    facts = with_nodes_down(chain, fake, gather_outcome(chain, status, record, info, None, "state_iter.txt"), record)
    decision = decide(facts, Policy(10), Tally())
    record_judgment(Executor(chain, FakeBackend()), settings, status, facts, decision)
    return decision.reason


def test_a_node_that_stalled_two_runners_is_left_out_of_the_next(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, settings, status = _chain(tmp_path, fake)
    _judge(chain, settings, status, fake, ["n2"], stalled=600.0)
    _next_runner(chain, status, "202")  # on the same node again
    _judge(chain, settings, status, fake, ["n2"], stalled=600.0)
    assert chain.load_status().node_strikes == {"n2": 2}  # type: ignore[union-attr]
    assert "excluded from the chain's later runners: n2" in chain.log_file.read_text()
    submit_runner_job(chain, fake, status, "c.r9", tmp_path)
    assert fake.excluded[-1] == ("n2",) and fake.excluded[0] == ()  # the first runner went anywhere
    report = api.status_report(chain.root, backend=fake)
    assert report.excluded_nodes == ["n2"]


def test_a_lost_node_of_two_is_the_one_blamed(tmp_path: Path) -> None:
    fake = FakeBackend()
    fake.down = {"n2"}
    chain, settings, status = _chain(tmp_path, fake)
    _judge(chain, settings, status, fake, ["n1", "n2"], slurm_state=JobState.NODE_FAIL)
    assert chain.load_status().node_strikes == {"n2": 1}  # type: ignore[union-attr]


def test_a_requeue_with_a_node_down_is_that_nodes_failure(tmp_path: Path) -> None:
    """A node failure requeues the runner as a preemption would: the down node tells them apart."""
    fake = FakeBackend()
    fake.down = {"n2"}
    chain, settings, status = _chain(tmp_path, fake)
    reason = _judge(chain, settings, status, fake, ["n1", "n2"], preempted=True)
    assert chain.load_status().node_strikes == {"n2": 1}  # type: ignore[union-attr]
    assert reason == "runner lost node n2 (Slurm requeued it): counter 0->0"  # not "preempted"


@pytest.mark.parametrize(
    "outcome",
    [
        {"slurm_state": JobState.FAILED},
        {"slurm_state": None},
        {"slurm_state": JobState.PREEMPTED},
        {"slurm_state": JobState.TIMEOUT},
        {"preempted": True},
        {"requeued": True},
    ],
)
def test_an_apps_own_failure_or_a_preemption_blames_no_node(tmp_path: Path, outcome: dict[str, Any]) -> None:
    fake = FakeBackend()
    chain, settings, status = _chain(tmp_path, fake)
    reason = _judge(chain, settings, status, fake, ["n1"], **outcome)
    assert chain.load_status().node_strikes == {}  # type: ignore[union-attr]
    assert "lost node" not in reason


def test_reset_excluded_needs_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["submit", "--reset-excluded", "--app-cmd", "true", "--backend", "local"])
    assert done.exit_code == 2 and "--reset-excluded goes with --resume" in done.output
    assert not (tmp_path / ".chain").exists()


def test_sinfo_node_states() -> None:
    # sinfo -h -N -n n1,n2,n3,n4,n5 -o '%N|%T'
    text = "n1|idle\nn2|down*\nn3|allocated*\nn4|drained\nn5|mixed\nn6|draining\n"
    assert down_nodes(text) == {"n2", "n3", "n4", "n6"}


def test_the_nodes_are_asked_only_when_the_rule_needs_them(tmp_path: Path) -> None:
    fake = FakeBackend()
    chain, settings, status = _chain(tmp_path, fake)
    _judge(chain, settings, status, fake, ["n1", "n2"], slurm_state=JobState.FAILED)  # the app's own failure
    _next_runner(chain, status, "202")
    _judge(chain, settings, status, fake, ["n1"], stalled=60.0)  # one node: it is the one, whatever sinfo says
    assert fake.node_queries == 0
    _next_runner(chain, status, "203")
    _judge(chain, settings, status, fake, ["n1", "n2"], requeued=True)
    assert fake.node_queries == 1


class NoSinfo(FakeBackend):
    def down_nodes(self, nodes: Sequence[str]) -> set[str]:
        raise SchedulerError("sinfo: slurmctld not responding")


def test_a_scheduler_that_cannot_say_blames_no_node_and_the_chain_goes_on(tmp_path: Path) -> None:
    fake = NoSinfo()
    chain, settings, status = _chain(tmp_path, fake)
    reason = _judge(chain, settings, status, fake, ["n1", "n2"], preempted=True)
    assert reason == "runner preempted: counter 0->0"
    assert chain.load_status().node_strikes == {}  # type: ignore[union-attr]
    assert (
        "could not ask which of the nodes n1,n2 are down: sinfo: slurmctld not responding" in chain.log_file.read_text()
    )
