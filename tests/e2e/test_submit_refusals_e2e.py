"""`chain submit` refusing before anything is queued, end
to end on both backends: a counter that goes bad while the chain runs stops
the chain with the reason; `chain submit --resume` with it still there is
refused (exit 3, one line, nothing queued, the counter untouched); once
repaired, the resume goes on from the repaired value."""

from __future__ import annotations

from pathlib import Path

from e2e_helpers import chain_cmd, wait_ended

APP_ENV = {"ITER_SECONDS": "0.05"}
# first run: writes a counter chain cannot read; once repaired: records where it started, finishes
APP = (
    "if [ -s state_iter.txt ]; then cat state_iter.txt >> starts.txt; echo 50 > state_iter.txt; "
    "else echo 'v2 iter 10' > state_iter.txt; fi"
)


def test_a_counter_gone_bad_stops_the_chain_and_resume_refuses_until_repaired(backend: str, tmp_path: Path) -> None:
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
        env=APP_ENV,
    )
    report = wait_ended(tmp_path, timeout=90)
    assert report["state"] in ("stopped", "failed") and "does not hold a plain integer" in report["reason"], report
    ckpt = tmp_path / "state_iter.txt"
    assert ckpt.read_text() == "v2 iter 10\n"

    refused = chain_cmd("submit", "--resume", cwd=tmp_path, env=APP_ENV, check=False)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1 and f"{ckpt} does not hold a plain integer: 'v2 iter 10'" in refused.stderr
    assert "plain integer, the iterations done" in refused.stderr
    after = wait_ended(tmp_path, timeout=10)
    assert (after["state"], after["submitter_cycle"], after["submitter_job_id"]) == (
        report["state"],
        0,
        report["submitter_job_id"],
    ), "a refused resume queued something"
    assert not (tmp_path / "starts.txt").exists() and ckpt.read_text() == "v2 iter 10\n"

    ckpt.write_text("10\n")  # repaired by hand
    chain_cmd("submit", "--resume", cwd=tmp_path, env=APP_ENV)
    report = wait_ended(tmp_path, timeout=90)
    assert report["state"] == "completed" and report["submitter_cycle"] == 1, report
    assert (tmp_path / "starts.txt").read_text() == "10\n"  # from the repaired value, once
    assert [(r["iter_before"], r["iter_after"]) for r in report["runners"]][-1] == (10, 50)
