"""With --lookahead and a runner wall time under the
promotion patience (120 s), a pre-queued runner that is not promoted leaves
before its own end (less its margin) instead of being killed by its limit
while it waits, and the chain neither raises its margin nor counts a stall
for it."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_helpers import chain_cmd, wait_ended, wait_prequeued
from waiting import wait_until

from chain.store import ChainDir

# sbatch's --time is whole minutes (chain rounds up: 1:30 would be 2:00, the
# patience itself), so a runner under 120 s is a 1-minute one
RUNNER_SECONDS, MARGIN = 60, 10

# each run: 8 s of "compute", +10 on the counter, exit 99 (checkpointed) or 0 at MAX_ITER
APP = (
    'n=$(cat state_iter.txt 2>/dev/null || echo 0); echo "$(date +%s.%N) start $n $SLURM_JOB_ID" >> app.log; '
    'sleep 8; echo $((n + 10)) > state_iter.txt; echo "$(date +%s.%N) exit $((n + 10)) $SLURM_JOB_ID" >> app.log; '
    "[ $((n + 10)) -ge 30 ] && exit 0; exit 99"
)


def test_a_short_prequeued_runner_leaves_before_its_end_and_no_margin_is_raised(backend: str, tmp_path: Path) -> None:
    """The submitter is frozen (SIGSTOP) while runner 1's app computes:
    runner 2, queued behind runner 1 with a 1-minute limit, starts when
    runner 1 ends and, never promoted, leaves by itself about 50 s later (its
    end less its 10 s margin, before the 120 s patience), COMPLETED, not
    TIMEOUT (before the fix Slurm killed it at 60 s and the submitter raised
    the margin).
    Thawed, the submitter submits a fresh runner; the chain completes with
    the margin it started with."""
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--lookahead",
        "--max-iter",
        "30",
        "--app-cmd",
        APP,
        "--runner-time",
        "1:00",
        "--runner-margin",
        str(MARGIN),
        "--poll-max",
        "10",
        "--submitter-time",
        "10:00",
        cwd=tmp_path,
    )
    chain_dir = tmp_path / ".chain"
    pq = wait_prequeued(tmp_path, backend)
    sched, app_lines, finished = pq.sched, pq.app_lines, pq.finished
    first, second, submitter = pq.first, pq.second, pq.submitter

    sched.cancel(submitter, signal="STOP")
    try:
        gone = wait_until(
            lambda: finished(second),
            RUNNER_SECONDS + 90,
            interval=1,
            what=f"pre-queued runner {second} to leave",
            describe=lambda: sched.query([first, second]),
        )
    finally:
        sched.cancel(submitter, signal="CONT")
    assert gone.state.value == "COMPLETED" and gone.start is not None and gone.end is not None, gone
    waited = gone.end - gone.start
    # Slurm's times are whole seconds; the runner's start-up and exit come on top
    assert RUNNER_SECONDS - MARGIN - 2 <= waited <= RUNNER_SECONDS - MARGIN + 5, waited
    record = ChainDir(chain_dir).read_record(second)
    assert record is not None
    assert record["superseded"] and "not promoted" in record["detail"], record

    report = wait_ended(tmp_path, timeout=240)
    log = (chain_dir / "chain.log").read_text()
    assert report["state"] == "completed", log
    assert f"pre-queued job {second} gave up waiting" in log, log
    assert "runner margin" not in log, log  # no margin learned from a runner that ran no app
    final = json.loads((chain_dir / "state.json").read_text())
    assert final.get("margin", 0) <= MARGIN and final.get("no_progress", 0) == 0, final
    judged = [json.loads(line) for line in (chain_dir / "runners.jsonl").read_text().splitlines()]
    assert all(j["state"] != "TIMEOUT" for j in judged), judged
    assert second not in [str(j.get("job_id")) for j in judged], judged
    jobs = [line[3] for line in app_lines() if line[1] == "start"]
    assert second not in jobs, "the pre-queued runner ran the app without being promoted"
    assert [line[1:3] for line in app_lines()] == [
        ["start", "0"],
        ["exit", "10"],
        ["start", "10"],
        ["exit", "20"],
        ["start", "20"],
        ["exit", "30"],
    ], app_lines()
