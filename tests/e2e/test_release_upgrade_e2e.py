"""Chains that the previous release left ended part-way go on under the
current code: the newest release's ``stopped`` and ``failed`` fixtures
(tests/unit/fixtures/releases/, made by scripts/make-release-fixtures), each
moved into tmp_path, what stopped it removed, then ``chain submit --resume
--max-iter 9 --wait`` on the local backend, and every iteration 1..9 is
computed once. ``stopped``: relay mode, two runners without progress at
counter 4 of 6 (the app held back by the file ``hold``); ``failed``:
submitter mode, the app failed at counter 4 (the file ``broken``), no
retries. The app, ``app.sh``'s ``app.py``, is the example app (the
fixtures leave it out: the user's file, not chain's). About 16 s each: three
new runners of two iterations at most.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e_helpers import EXAMPLES, IterLog, chain_cmd, status

RELEASES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "releases"


def newest(case: str) -> Path:
    """The fixture of CASE of the newest release that has one."""
    fixtures = [p for p in RELEASES.iterdir() if p.name.endswith(f"-{case}")]
    return max(fixtures, key=lambda p: tuple(int(n) for n in p.name.split("-", 1)[0].split(".")))


@pytest.mark.local
@pytest.mark.parametrize(
    ("case", "mode", "state", "old_count", "cause"),
    [("stopped", "relay", "stopped", 4, "hold"), ("failed", "submitter", "failed", 3, "broken")],
)
def test_a_chain_the_previous_release_ended_part_way_is_resumed_and_completes(
    case: str, mode: str, state: str, old_count: int, cause: str, tmp_path: Path
) -> None:
    fixture = newest(case)
    work = tmp_path / fixture.name
    shutil.copytree(fixture, work, symlinks=True)
    state_file = work / ".chain" / "state.json"
    old = json.loads(state_file.read_text())
    state_file.write_text(json.dumps({**old, "workdir": str(work)}))  # the directory as the release left it, moved
    before = status(work)
    assert (before["state"], before["iteration"], before["runner_count"]) == (state, 4, old_count), before
    old_runners = before["runners"]
    old_jobs = int((work / ".chain" / "local-jobs" / "counter").read_text())  # the local spool's last job id

    (work / cause).unlink()  # what stopped it is fixed
    shutil.copy(EXAMPLES / "python" / "app.py", work / "app.py")  # the app app.sh runs (not kept in the fixture)
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}  # the user's registry of chains, in tmp_path
    chain_cmd("submit", "--resume", "--backend", "local", "--max-iter", "9", "--wait", cwd=work, env=env, timeout=120)

    report = status(work)
    log = (work / ".chain" / "chain.log").read_text()
    assert (report["state"], report["iteration"], report["max_iter"]) == ("completed", 9, 9), log
    assert report["chain_id"] == old["chain_id"] and report["mode"] == mode
    runners = report["runners"]
    assert runners[: len(old_runners)] == old_runners  # the release's runners read as before
    new = runners[len(old_runners) :]
    assert len(new) >= 3 and new[0]["iter_before"] == 4 and new[-1]["iter_after"] == 9
    assert [r["seq"] for r in runners] == list(range(1, len(runners) + 1))
    assert [r["iter_before"] for r in new[1:]] == [r["iter_after"] for r in new[:-1]]
    assert [r["verdict"] for r in new] == ["continue"] * (len(new) - 1) + ["complete"]
    assert [r["kind"] for r in new] == ["handed_over"] * (len(new) - 1) + ["finished"]
    assert all(int(r["job_id"]) > old_jobs for r in new)  # the local spool went on numbering its jobs
    assert "resumed chain " + old["chain_id"] in log
    assert (work / "state_iter.txt").read_text().strip() == "9"
    iterlog = IterLog.read(work / "iterations.log")
    assert iterlog.check_exactly_once_beyond_checkpoints(9) == 0  # every iteration 1..9 once
    assert len(iterlog.starts()) == 2 + len(new)  # the release's two (app.sh ended the others before app.py)
