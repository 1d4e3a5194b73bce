"""The chain's reasons as a user reads them in `chain status`,
on a real chain on both backends: a counter that went back (an app that
starts from scratch instead of resuming) is called out in the runner's
reason and in the chain's, and counts as no progress."""

from __future__ import annotations

from pathlib import Path

from e2e_helpers import chain_cmd, wait_ended

BACK = "(the app started from scratch? does it resume from its checkpoint?)"
# Run 1 counts to 5; later runs "start from scratch" and get less far (2, 1).
APP = (
    "n=$(cat runs 2>/dev/null || echo 0); n=$((n + 1)); echo $n > runs; "
    'case $n in 1) c=5 ;; 2) c=2 ;; *) c=1 ;; esac; echo $c > "$CKPT_PATH"; exit 99'
)


def test_a_counter_that_goes_back_is_called_out_and_stops_the_chain(backend: str, tmp_path: Path) -> None:
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "50",
        "--app-cmd",
        APP,
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        "--poll-max",
        "10",
        cwd=tmp_path,
    )
    report = wait_ended(tmp_path, timeout=120)
    assert report["state"] == "stopped", report
    assert [(r["iter_before"], r["iter_after"]) for r in report["runners"]] == [(0, 5), (5, 2), (2, 1)]
    assert report["reason"] == f"no progress in 2 runners in a row: the counter went back from 2 to 1 {BACK}"
    reasons = [r["reason"] for r in report["runners"]]
    assert reasons[0] == "app exited 99 (checkpointed): counter 0->5", reasons
    assert reasons[1] == (
        f"app exited 99 (checkpointed) but the counter went back from 5 to 2 {BACK}; "
        "runner 1 in a row without progress, the chain stops at 2"
    ), reasons
    shown = chain_cmd("status", cwd=tmp_path, env={"COLUMNS": "250"}).stdout
    assert "the counter went back from 2 to 1" in shown, shown
