"""A nanoGPT-shaped script,
counted with ``--counter-cmd`` (its own checkpoint, no CKPT_PATH file), run
to the end with ``chain submit --wait`` on the local backend. The ``--wait``
lines follow its checkpoint (they showed ``0/40`` throughout and ``completed
0/40`` at the end), and ``chain status``, ``status --json``, ``chain list``
and the report all show the checkpoint's counter."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from e2e_helpers import chain_cmd

APP = Path(__file__).resolve().parent / "apps" / "nanogpt_like.py"
MAX_ITER = 40
LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] (\w+) (\d+)/(\d+)")


@pytest.mark.local
def test_every_view_follows_a_counter_cmd_chain_to_its_end(tmp_path: Path) -> None:
    shutil.copy(APP, tmp_path / "app.py")
    app = f"python3 app.py --max_iters={MAX_ITER} --iter_time=0.25 ${{CHAIN_RESUMING:+--init_from=resume}}"
    done = chain_cmd(
        "submit",
        "--backend",
        "local",
        "--max-iter",
        str(MAX_ITER),
        "--app-cmd",
        app,
        "--counter-cmd",
        "json:out/ckpt.json:iter_num",
        "--runner-time",
        "0:10",
        "--runner-margin",
        "3",
        "--poll-max",
        "5",
        "--wait",
        cwd=tmp_path,
        timeout=240,
    )
    seen = [(m.group(1), int(m.group(2))) for line in done.stdout.splitlines() if (m := LINE.match(line))]
    assert seen and seen[-1] == ("completed", MAX_ITER), done.stdout
    counters = [n for _, n in seen]
    assert counters == sorted(counters) and any(0 < n < MAX_ITER for n in counters), done.stdout
    checkpoint = json.loads((tmp_path / "out" / "ckpt.json").read_text())["iter_num"]
    assert checkpoint == MAX_ITER and not (tmp_path / "state_iter.txt").exists()
    report = json.loads(chain_cmd("status", "--json", cwd=tmp_path).stdout)
    assert (report["state"], report["iteration"]) == ("completed", checkpoint), report
    assert f" {MAX_ITER}/{MAX_ITER} (100%)" in chain_cmd("status", cwd=tmp_path).stdout
    [row] = json.loads(chain_cmd("list", str(tmp_path), "--json", cwd=tmp_path).stdout)
    assert row["iteration"] == checkpoint, row
    chain_cmd("report", cwd=tmp_path)
    summary = json.loads((tmp_path / ".chain" / "report" / "summary.json").read_text())
    assert summary["iteration"] == checkpoint, summary
    assert len(report["runners"]) >= 2, report["runners"]
