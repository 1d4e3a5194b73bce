"""Ctrl-C during `chain submit --wait`, on a real chain on
both backends: the terminal's SIGINT to the command's process group ends
the watching with one line and 130; the chain goes on and completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from e2e_helpers import wait_ended
from fakes import sigint_default

# two runners of about 3 s each: the chain is still running when ^C comes
APP = (
    'c=$(cat "$CKPT_PATH" 2>/dev/null || echo 0); sleep 3; c=$((c + 1)); echo $c > "$CKPT_PATH"; '
    '[ "$c" -ge "$MAX_ITER" ] && exit 0; exit 99'
)


def test_ctrl_c_in_submit_wait_leaves_the_chain_running(backend: str, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chain",
            "submit",
            "--backend",
            backend,
            "--max-iter",
            "2",
            "--app-cmd",
            APP,
            "--runner-time",
            "0:40",
            "--runner-margin",
            "10",
            "--poll-max",
            "5",
            "--wait",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell's foreground job
        preexec_fn=sigint_default,  # noqa: PLW1509 - no threads in the test process here
    )
    assert proc.stdout is not None
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines[1].startswith("chain directory:"), lines
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on ^C
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "stopped watching" in err, (proc.returncode, err)
    assert err.splitlines()[-1] == (
        "chain: stopped watching; the chain goes on (its jobs keep running). "
        f"Watch it again with: chain status --watch --chain-dir {tmp_path / '.chain'}"
    )
    assert "Traceback" not in err
    report = wait_ended(tmp_path, timeout=180)
    assert report["state"] == "completed" and report["iteration"] == 2, report
