"""A chain whose newest checkpoint is corrupt resumes from the one before, on
both backends: the app (chain.app's publish_dir: shards, DONE last, one
rename; counted with ``--counter-cmd glob:ck/step-*``) loses the tail of
its newest checkpoint's shard after runner 1's last save; runner 2 finds it
broken against its DONE manifest, sets it aside (renamed, not deleted) with
a line in its log, and the app resumes from the previous checkpoint. The
counter chain records never goes back, and the report counts the redone steps."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_helpers import chain_cmd, wait_ended

MAX_ITER = 12
APP = """\
import os, sys, time
from pathlib import Path
from chain.app.atomic import publish_dir

ck = Path("ck")
ck.mkdir(exist_ok=True)
done = [int(d.name.split("-")[1]) for d in ck.glob("step-*") if (d / "DONE").is_file()]
step = max(done, default=0)
if step:  # the app trusts the newest checkpoint it finds: chain must have set a bad one aside
    assert (ck / f"step-{step}" / "weights.bin").read_bytes() == bytes([step]) * 1000, step
with open("starts.txt", "a") as fh:
    fh.write(f"{step}\\n")
while step < int(os.environ["MAX_ITER"]):
    time.sleep(0.1)
    step += 1
    if step % 2 == 0:
        with publish_dir(ck / f"step-{step}") as scratch:
            (scratch / "weights.bin").write_bytes(bytes([step]) * 1000)
        if step == 6 and not os.path.exists("corrupted"):
            Path("corrupted").touch()
            with open(ck / "step-6" / "weights.bin", "r+b") as fh:
                fh.truncate(100)  # the disk lost the tail after the save was published
            sys.exit(99)
"""


def test_a_corrupt_newest_checkpoint_is_set_aside_and_the_previous_one_resumed(backend: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        str(MAX_ITER),
        "--counter-cmd",
        "glob:ck/step-*",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:40",
        "--runner-margin",
        "5",
        "--poll-max",
        "5",
        cwd=tmp_path,
    )
    report = wait_ended(tmp_path, timeout=180)
    assert (report["state"], report["iteration"]) == ("completed", MAX_ITER), report
    assert (tmp_path / "starts.txt").read_text().split() == ["0", "4"]
    aside = list((tmp_path / "ck" / "chain-set-aside").iterdir())
    assert [p.name.split(".")[0] for p in aside] == ["step-6"] and (aside[0] / "DONE").is_file()
    logs = "".join(p.read_text() for p in sorted((tmp_path / ".chain" / "logs").glob("*.out")))
    assert "checkpoint ck/step-6 broken (shard weights.bin has 100 bytes, DONE says 1000): set aside as " in logs
    assert "; resuming from ck/step-4" in logs
    runners = report["runners"]
    assert [(r["iter_before"], r["iter_after"]) for r in runners] == [(0, 6), (6, MAX_ITER)], runners
    chain_cmd("report", cwd=tmp_path, timeout=120)
    summary = json.loads((tmp_path / ".chain" / "report" / "summary.json").read_text())
    redone = summary["work_redone"]
    assert (redone["iterations"], redone["by_job"]) == (2, {runners[1]["job_id"]: 2}), redone
