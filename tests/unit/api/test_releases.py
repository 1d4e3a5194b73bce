"""Files written by earlier releases are still read: real chains that each
release ran on the local backend (tests/unit/fixtures/releases/, made by
scripts/make-release-fixtures), read by the current code through the
commands a user runs on them: ``chain status``, ``chain list``, ``chain
logs``, ``chain report``.

Here, beside chain/api, because what must keep working is what the user does
with an old directory, and the commands read it through chain.api (status's
report and failure tail, list's rows from settings.json, logs' runner by
number, the report from the records and iterations.log); the store's and
core's reading (state.json, runners.jsonl, the runner records, a reason's
kind from its words) is checked underneath, on the same directories.

Each test copies a fixture into tmp_path and rewrites state.json's workdir:
the directory as that release left it, moved. The other absolute paths in it
(the hooks' logs and argv, the local spool's records) keep the place where
the release ran, as a moved directory would.

Every directory there is a case, named VERSION-CASE: ``submitter`` and
``relay`` completed in that mode, ``failed`` (the app failed at counter 4,
no retries, submitter mode), ``stopped`` (relay mode: two runners without
progress at counter 4).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chain.api import listing
from chain.api.status import status_report
from chain.cli import app
from chain.core.model import ChainState
from chain.core.reasons import ReasonKind
from chain.store import ChainDir

RELEASES = Path(__file__).resolve().parents[1] / "fixtures" / "releases"
FIXTURES = sorted(p.name for p in RELEASES.iterdir() if p.is_dir())
MAX_ITER = 6  # every fixture's --max-iter


@dataclass(frozen=True)
class Case:
    """What a case's chain did: its end, and the kinds of its runners' lines."""

    state: ChainState
    mode: str
    iteration: int
    reason_kind: ReasonKind
    last_kinds: tuple[ReasonKind, ...]  # the last runners' kinds; every one before handed over

    def kinds(self, runners: int) -> list[ReasonKind]:
        return [ReasonKind.HANDED_OVER] * (runners - len(self.last_kinds)) + list(self.last_kinds)


CASES = {
    "submitter": Case(ChainState.COMPLETED, "submitter", 6, ReasonKind.FINISHED, (ReasonKind.FINISHED,)),
    "relay": Case(ChainState.COMPLETED, "relay", 6, ReasonKind.FINISHED, (ReasonKind.FINISHED,)),
    "failed": Case(ChainState.FAILED, "submitter", 4, ReasonKind.APP_FAILED, (ReasonKind.APP_FAILED,)),
    "stopped": Case(
        ChainState.STOPPED, "relay", 4, ReasonKind.NO_PROGRESS, (ReasonKind.NO_ADVANCE, ReasonKind.NO_PROGRESS)
    ),
}


def case_of(name: str) -> Case:
    return CASES[name.split("-", 1)[1]]


def moved(name: str, tmp_path: Path) -> Path:
    """The working directory of fixture NAME as its release left it, moved
    to tmp_path/NAME: copied, and state.json's workdir rewritten to the new
    place. Returns the working directory."""
    work = tmp_path / name
    shutil.copytree(RELEASES / name, work, symlinks=True)
    state_file = work / ".chain" / "state.json"
    state = json.loads(state_file.read_text())
    state["workdir"] = str(work)
    state_file.write_text(json.dumps(state, sort_keys=True))
    return work


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "CHAIN_DIR": None})
    return result


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_there_is_a_fixture_of_each_case_for_each_release() -> None:
    versions = {name.split("-", 1)[0] for name in FIXTURES}
    assert {"0.1.0", "0.2.0"} <= versions
    assert sorted(FIXTURES) == sorted(f"{v}-{case}" for v in versions for case in CASES)


@pytest.mark.parametrize("name", FIXTURES)
def test_chain_status_json_shows_the_state_progress_runners_and_their_kinds(name: str, tmp_path: Path) -> None:
    case = case_of(name)
    work = moved(name, tmp_path)
    before = digests(work)
    result = invoke("status", "--json", "--chain-dir", str(work / ".chain"))
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["state"], report["mode"], report["backend"]) == (case.state.value, case.mode, "local")
    assert (report["iteration"], report["max_iter"]) == (case.iteration, MAX_ITER)
    assert report["workdir"] == str(work) and report["chain_dir"] == str(work / ".chain")
    runners = report["runners"]
    lines = (work / ".chain" / "runners.jsonl").read_text().splitlines()
    assert report["runner_count"] == len(runners) == len(lines) >= len(case.last_kinds) + 1
    assert [r["seq"] for r in runners] == list(range(1, len(runners) + 1))
    assert [r["kind"] for r in runners] == [k.value for k in case.kinds(len(runners))]
    assert [r["verdict"] for r in runners[:-1]] == ["continue"] * (len(runners) - 1)
    assert runners[-1]["verdict"] == ("complete" if case.state is ChainState.COMPLETED else "stop")
    assert runners[0]["iter_before"] == 0 and runners[-1]["iter_after"] == case.iteration
    assert [r["iter_before"] for r in runners[1:]] == [r["iter_after"] for r in runners[:-1]]
    assert report["reason"] == runners[-1]["reason"] or case.state is ChainState.COMPLETED
    if case.state is not ChainState.COMPLETED:  # the failed runner's output, found in the moved directory
        assert report["failure"]["log"] == str(work / ".chain" / "logs" / f"runner-{runners[-1]['job_id']}.out")
        assert report["failure"]["tail"]
    assert digests(work) == before  # reading an old directory leaves it as it was


@pytest.mark.parametrize("name", FIXTURES)
def test_the_store_reads_the_state_the_runner_lines_and_records_with_their_kinds(name: str, tmp_path: Path) -> None:
    """Written before kinds: the kind of every reason comes from its words
    (core.legacy), in state.json and in each line of runners.jsonl; every
    runner's record (runners/<job>.json) reads."""
    case = case_of(name)
    chain = ChainDir(moved(name, tmp_path) / ".chain")
    assert "kind" not in (chain.root / "runners.jsonl").read_text()  # none was stored: they are read from words
    status = chain.load_status()
    assert status is not None
    assert (status.state, status.iteration, status.reason_kind) == (case.state, case.iteration, case.reason_kind)
    runners = list(chain.iter_runners())
    assert [r.kind for r in runners] == case.kinds(len(runners))
    assert status.runner_seq == len(runners)
    assert chain.read_settings()["mode"] == case.mode
    for runner in runners:
        record = chain.runner_record(runner.job_id)
        assert record is not None, runner.job_id
        assert (record.seq, record.iter_before, record.iter_after) == (
            runner.seq,
            runner.iter_before,
            runner.iter_after,
        )
    assert set(chain.worker_id_list()) >= {r.job_id for r in runners}
    assert len(chain.submitter_id_list()) == (1 if case.mode == "submitter" else 0)
    assert status_report(chain.root, live=False).runner_count == len(runners)


@pytest.mark.parametrize("name", FIXTURES)
def test_chain_status_shows_it_in_words(name: str, tmp_path: Path) -> None:
    case = case_of(name)
    work = moved(name, tmp_path)
    result = invoke("status", "--chain-dir", str(work / ".chain"))
    assert result.exit_code == 0, result.stderr
    assert case.state.value in result.stdout and f"{case.iteration}/{MAX_ITER}" in result.stdout


def test_chain_list_shows_every_release_s_chain(tmp_path: Path) -> None:
    works = {name: moved(name, tmp_path) for name in FIXTURES}
    result = invoke("list", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    rows = {Path(row["directory"]).parent.name: row for row in json.loads(result.stdout)}
    assert sorted(rows) == FIXTURES
    for name, row in rows.items():
        case = case_of(name)
        state = json.loads((works[name] / ".chain" / "state.json").read_text())
        assert (row["chain_id"], row["mode"], row["state"]) == (state["chain_id"], case.mode, case.state.value)
        assert (row["iteration"], row["max_iter"], row["reason"]) == (case.iteration, MAX_ITER, state["reason"])
    table = invoke("list", str(tmp_path))
    assert table.exit_code == 0, table.stderr
    assert all(
        json.loads((w / ".chain" / "state.json").read_text())["chain_id"] in table.stdout for w in works.values()
    )
    assert [r.chain_id for r in listing.list_rows(listing.find_chains([tmp_path]))]  # the API's rows too


@pytest.mark.parametrize("name", FIXTURES)
def test_chain_logs_prints_each_runner_s_output_and_the_submitter_s(name: str, tmp_path: Path) -> None:
    case = case_of(name)
    chain_dir = moved(name, tmp_path) / ".chain"
    runners = [json.loads(line) for line in (chain_dir / "runners.jsonl").read_text().splitlines()]
    last = invoke("logs", "--chain-dir", str(chain_dir))
    assert last.exit_code == 0, last.stderr
    assert last.stdout == (chain_dir / "logs" / f"runner-{runners[-1]['job_id']}.out").read_text()
    for runner in runners:
        shown = invoke("logs", "--runner", str(runner["seq"]), "--chain-dir", str(chain_dir))
        assert shown.exit_code == 0, shown.stderr
        assert f"chain runner {runner['seq']} (job {runner['job_id']}): start, counter {runner['iter_before']}" in (
            shown.stdout
        )
    submitter = invoke("logs", "--submitter", "--chain-dir", str(chain_dir))
    if case.mode == "submitter":
        (job,) = (chain_dir / "submitter_ids.txt").read_text().split()
        assert submitter.exit_code == 0, submitter.stderr
        assert submitter.stdout == (chain_dir / "logs" / f"submitter-{job}.out").read_text()
    else:  # relay mode has no submitter: said in one line
        assert submitter.exit_code == 2 and "runs in relay mode: it has no submitter job" in submitter.stderr


@pytest.mark.parametrize("name", FIXTURES)
def test_chain_report_writes_its_report(name: str, tmp_path: Path) -> None:
    case = case_of(name)
    chain_dir = moved(name, tmp_path) / ".chain"
    assert not (chain_dir / "report").exists()  # the release's report is not in the fixture
    result = invoke("report", "--quiet", "--chain-dir", str(chain_dir))
    assert result.exit_code == 0, result.stderr
    summary = json.loads((chain_dir / "report" / "summary.json").read_text())
    runners = (chain_dir / "runners.jsonl").read_text().splitlines()
    assert (summary["state"], summary["iteration"], summary["max_iter"]) == (case.state.value, case.iteration, MAX_ITER)
    assert summary["totals"]["runners"] == len(runners) and summary["totals"]["iterations"] == case.iteration
    assert summary["iteration_log"] == str(chain_dir.parent / "iterations.log")
    assert summary["work_redone"]["iterations"] == 0  # every iteration once, as the app's log says
    usage = (chain_dir / "report" / "usage.csv").read_text().splitlines()
    assert len(usage) == 1 + len(runners)
