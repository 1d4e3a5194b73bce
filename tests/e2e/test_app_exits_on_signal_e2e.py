"""End to end on both backends and in both modes: an app written as
a user writes one, without chain's helpers, that saves its counter when it
gets SIGTERM and then ``sys.exit(0)``s, and resumes only when told
(``--resume``, from ``${CHAIN_RESUMING:+--resume}`` in the app command, run
by a shell). chain failed it after runner 1 ("app exited 0 but the counter
is 75 < MAX_ITER 150"); it completes as a chain of several runners, each
resuming where the one before saved."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import chain_cmd, wait_ended

from chain.store import ChainDir

APP = """\
import os
import signal
import sys
import time

max_iter = int(os.environ["MAX_ITER"])
path = os.environ["CKPT_PATH"]
resume = "--resume" in sys.argv
n = int(open(path).read()) if resume else 0
stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
with open("app.log", "a") as log:
    log.write(f"start {n} resume={resume}\\n")
while n < max_iter and not stop:
    time.sleep(0.25)
    n += 1
with open(path + ".tmp", "w") as f:
    f.write(f"{n}\\n")
os.replace(path + ".tmp", path)
with open("app.log", "a") as log:
    log.write(f"saved {n}\\n")
sys.exit(0)
"""


@pytest.mark.parametrize("mode", ["submitter", "relay"])
def test_an_app_that_saves_on_term_and_exits_0_completes_a_chain(backend: str, mode: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--mode",
        mode,
        "--max-iter",
        "60",
        "--app-cmd",
        "python3 app.py ${CHAIN_RESUMING:+--resume}",
        "--runner-time",
        "0:12",
        "--runner-margin",
        "4",
        "--poll-max",
        "5",
        cwd=tmp_path,
    )
    report = wait_ended(tmp_path, timeout=300)
    log = (tmp_path / "app.log").read_text().splitlines()
    assert report["state"] == "completed", (report, log)
    runners = report["runners"]
    assert len(runners) >= 2 and report["iteration"] == 60, (report, log)
    # every runner but the last was stopped by chain's signal and handed over
    # (124: advanced); none was judged a failure
    assert all(r["exit_code"] == 124 and r["verdict"] == "continue" for r in runners[:-1]), runners
    first = ChainDir(tmp_path / ".chain").runner_record(runners[0]["job_id"])
    assert first is not None and first.app_exit_code == 0, first
    assert first.detail.startswith("app stopped on the signal (exit 0)"), first.detail
    # the runner records the fact beside its words; the judgment's reason is that account, its kind a handover
    assert first.stopped_on_signal, first
    assert runners[0]["reason"].startswith(first.detail) and runners[0]["kind"] == "handed_over", runners[0]
    # CHAIN_RESUMING: runner 1 started afresh, every later one resumed at the
    # counter the one before saved
    starts = [line for line in log if line.startswith("start ")]
    saves = [line.split()[1] for line in log if line.startswith("saved ")]
    assert starts[0] == "start 0 resume=False", log
    assert starts[1:] == [f"start {n} resume=True" for n in saves[:-1]], log
