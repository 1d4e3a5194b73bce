"""End to end on both backends and in both modes: an app that
hangs the way a rank in a dead collective hangs (it ignores SIGTERM and
prints nothing) is stopped by ``--stall-timeout`` long before its runner's
time, judged "app stalled", and the next runner goes on from its last
checkpoint to complete the chain, every iteration after it done once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e_helpers import chain_cmd, wait_ended

APP = """\
import os
import signal
import sys
import time

max_iter = int(os.environ["MAX_ITER"])
path = os.environ["CKPT_PATH"]
n = int(open(path).read()) if os.path.exists(path) else 0
first = not os.path.exists("hung.once")
while n < max_iter:
    if first and n == 8:
        open("hung.once", "w").close()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stuck in a collective: deaf to the stop signal
        time.sleep(3600)
    time.sleep(0.2)
    n += 1
    with open("done.log", "a") as log:
        log.write(f"{n}\\n")
    print(f"iteration {n}", flush=True)
    if n % 4 == 0:
        with open(path + ".tmp", "w") as f:
            f.write(f"{n}\\n")
        os.replace(path + ".tmp", path)
with open(path + ".tmp", "w") as f:
    f.write(f"{n}\\n")
os.replace(path + ".tmp", path)
sys.exit(0)
"""


@pytest.mark.parametrize("mode", ["submitter", "relay"])
def test_a_hung_app_is_stopped_and_the_chain_goes_on(backend: str, mode: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    started = time.monotonic()
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--mode",
        mode,
        "--max-iter",
        "20",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "3:00",
        "--runner-margin",
        "4",
        "--stall-timeout",
        "5",
        "--fixed-margin",
        "--poll-max",
        "5",
        cwd=tmp_path,
    )
    report = wait_ended(tmp_path, timeout=150)
    assert report["state"] == "completed", report
    assert time.monotonic() - started < 120  # not the hung runner's 3 minutes
    reasons = [r["reason"] for r in report["runners"]]
    assert reasons[0].startswith("app stalled: no sign of progress for"), reasons
    assert len(reasons) == 2
    done = [int(x) for x in (tmp_path / "done.log").read_text().split()]
    assert done == list(range(1, 21)), done  # the hang came right after a checkpoint: nothing redone
