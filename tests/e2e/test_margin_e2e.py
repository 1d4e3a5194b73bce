"""The adaptive margin tells the truth, end to end: an app whose
checkpoint after the stop signal takes longer than a short runner can give
is not raised past half the runner; the chain says so at every runner, in
its log and in `chain status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_helpers import chain_cmd, status, wait_ended

# periodic saves every SAVE_EVERY iterations of 0.1 s; on the stop signal a
# checkpoint that takes STOP_DELAY seconds
SLOW_STOP_APP = """\
import os, signal, sys, time
path, every, delay = os.environ["CKPT_PATH"], int(os.environ["SAVE_EVERY"]), float(os.environ["STOP_DELAY"])
i = int(open(path).read()) if os.path.exists(path) else 0
stop = False
signal.signal(signal.SIGTERM, lambda *_: globals().update(stop=True))
def save():
    open(path + ".tmp", "w").write(str(i)); os.replace(path + ".tmp", path)
while i < int(os.environ["MAX_ITER"]):
    if stop:
        time.sleep(delay)
        save()
        sys.exit(99)
    time.sleep(0.1)
    i += 1
    if i % every == 0 and not stop:  # once stopped, the slow checkpoint below saves
        save()
save()
"""


@pytest.mark.local
def test_a_stop_longer_than_a_short_runner_can_give_is_said_at_every_runner(tmp_path: Path) -> None:
    """12 s runners, a 6 s checkpoint on the stop. Runner 1 (margin 2 s) is
    killed before its checkpoint: the margin is raised, but only to half the
    runner less its start-up (5 s); runner 2 is killed again with that
    margin: the log and `chain status` say the stop does not fit and name the
    fixes. The periodic saves carry the chain to MAX_ITER regardless."""
    (tmp_path / "app.py").write_text(SLOW_STOP_APP)
    chain_cmd(
        "submit",
        "--backend",
        "local",
        "--max-iter",
        "200",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:12",
        "--runner-margin",
        "2",
        "--poll-max",
        "5",
        cwd=tmp_path,
        env={"SAVE_EVERY": "10", "STOP_DELAY": "6"},
    )
    reasons: list[str] = []
    report = wait_ended(tmp_path, timeout=120, sample=lambda: reasons.append(status(tmp_path)["reason"]))
    log = (tmp_path / ".chain" / "chain.log").read_text()
    assert report["state"] == "completed", log
    records = [
        json.loads(p.read_text())
        for p in sorted((tmp_path / ".chain" / "runners").glob("*.json"), key=lambda p: int(p.stem))
    ]
    assert len(records) >= 3 and records[0]["killed"] and records[1]["killed"], records
    cap = records[1]["margin"]
    assert cap in (4, 5) and all(r["margin"] == cap for r in records[1:]), records  # never above the cap
    assert f"runner margin 2s -> {cap}s (the app was killed before it finished its checkpoint; capped at" in log
    said = (
        ("margin does not fit: the app was killed "),
        (
            "s after the stop signal, before its checkpoint was "
            f"complete, with the largest margin a 12s runner can "
            f"give (margin {cap}s"
        ),
    )
    lines = [line for line in log.splitlines() if said[0] in line]
    assert lines and all(
        said[1] in line and "--runner-time 0:00:" in line and "--fixed-margin" in line for line in lines
    ), log
    assert "runner 1: margin does not fit" not in log  # killed below the cap: raised, not a warning
    assert "runner 2: margin does not fit" in log
    assert any(r.startswith("margin does not fit: the app was killed") for r in reasons), reasons
