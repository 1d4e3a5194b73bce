"""The local backend signals only what chain started.

``chain status`` and ``chain cancel`` run as a subprocess in a session of
their own, beside a sentinel process in their own process group, on a chain
whose submitter job record names a process chain did not start: pid 0, -5
or 1 (never written by chain: the record is corrupt), the caller itself
(with its true start time), the sentinel (a process of the caller's group,
true start time), a process that ended, or a live pid whose start time is
not the recorded one. Each ends in one clear way (exit 0 with the job
lost, or exit 2 and one line: the record is corrupt), and the sentinel
outlives it: no signal reached the caller's process group (before the fix,
``os.killpg(0, SIGKILL)`` killed the group: rc -9, 137 in a shell; a
negative pid was an uncaught error, exit 70)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from chain.backends.local.spool import JobRecord, current_user
from chain.core.model import ChainState, JobState
from chain.core.resolution import resolve
from chain.store import ChainDir, ChainStatus, write_json

pytestmark = pytest.mark.timeout(120)

# Runs in its own session: starts the sentinel in its own process group,
# fills in the record's pids that only it knows, then becomes `chain`.
_WRAPPER = textwrap.dedent("""
    import json, os, subprocess, sys
    record, case, *argv = sys.argv[1:]
    quiet = subprocess.DEVNULL  # the sentinel must not hold the test's pipes
    sentinel = subprocess.Popen(["sleep", "300"], stdin=quiet, stdout=quiet, stderr=quiet)
    def ticks(pid):
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19])
    data = json.load(open(record))
    me = os.getpid()
    if case == "caller":  # the caller itself, leader of its process group, true start time
        data.update(batch_pid=me, batch_ticks=ticks(me))
    elif case == "sentinel":  # a live "supervisor" in the caller's group, true start time
        data.update(supervisor_pid=sentinel.pid, supervisor_ticks=ticks(sentinel.pid))
    elif case == "reused":  # the caller's pid, but not the start time recorded
        data.update(batch_pid=me, batch_ticks=ticks(me) - 1)
    with open(record, "w") as fh:
        json.dump(data, fh)
    with open(record + ".sentinel", "w") as fh:
        fh.write(str(sentinel.pid))
    os.execv(sys.executable, [sys.executable, "-m", "chain", *argv])
""")


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _chain(tmp_path: Path, **fields: Any) -> Path:
    """A running chain on the local backend whose submitter is job 1, its
    record RUNNING with a supervisor that ended (unless ``fields`` say)."""
    chain = ChainDir(tmp_path / ".chain")
    chain.create()
    settings = resolve({"app_cmd": "true", "max_iter": "10", "backend": "local"}, {}, {})
    write_json(chain.settings_file, settings.to_json())
    chain.save_status(
        ChainStatus(
            chain_id="chain-abcdef",
            state=ChainState.RUNNING,
            workdir=str(tmp_path),
            backend="local",
            submitter_job_id="1",
        )
    )
    spool = chain.root / "local-jobs"
    (spool / "jobs").mkdir(parents=True)
    (spool / "counter").write_text("1\n")
    now = time.time()
    record = JobRecord(
        job_id="1",
        name="chain-abcdef.s0",
        user=current_user(),
        batch_script=str(spool / "jobs" / "1.sh"),
        script=str(chain.root / "scripts" / "submitter.sbatch"),
        submit_dir=str(tmp_path),
        work_dir=str(tmp_path),
        stdout=str(tmp_path / "submitter.out"),
        stderr=str(tmp_path / "submitter.out"),
        open_mode="append",
        dependency=None,
        time_limit=600.0,
        time_limit_text="10:00",
        time_scale=1.0,
        kill_wait=1.0,
        env={},
        submit_time=now - 100,
        state=JobState.RUNNING,
        start=now - 99,
        end=now + 500,
        supervisor_pid=_dead_pid(),
        supervisor_ticks=1,
        batch_pid=_dead_pid(),
        batch_ticks=1,
    )
    data = record.to_json()
    data.update(fields)
    (spool / "jobs" / "1.json").write_text(json.dumps(data))
    return spool / "jobs" / "1.json"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _run_beside_sentinel(record: Path, case: str, *argv: str) -> tuple[int, str, str, bool]:
    """(exit status, stdout, stderr, the sentinel survived) of `chain ARGV`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, str(record), case, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # whatever chain signals, it is not this test's group
    )
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    sentinel = int(Path(f"{record}.sentinel").read_text())
    survived = _alive(sentinel)
    if survived:
        os.kill(sentinel, signal.SIGKILL)  # this test's own sleep
    return proc.returncode, out, err, survived


CORRUPT = [
    pytest.param({"batch_pid": 0}, "bad batch_pid 0", id="batch_pid-0"),
    pytest.param({"batch_pid": -5}, "bad batch_pid -5", id="batch_pid-negative"),
    pytest.param({"batch_pid": 1}, "bad batch_pid 1", id="batch_pid-1"),
    pytest.param({"supervisor_pid": 0}, "bad supervisor_pid 0", id="supervisor_pid-0"),
    pytest.param({"batch_pid": "12"}, "bad batch_pid '12'", id="batch_pid-text"),
    pytest.param({"job_id": "7"}, "job_id '7' is not '1'", id="another-id"),
]
FOREIGN = ["caller", "sentinel", "reused", "dead"]
COMMANDS = [["status"], ["cancel"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(("fields", "why"), CORRUPT)
def test_a_record_chain_never_writes_is_corrupt_in_one_line(
    tmp_path: Path, command: list[str], fields: dict[str, Any], why: str
) -> None:
    record = _chain(tmp_path, **fields)
    rc, out, err, survived = _run_beside_sentinel(record, "none", *command, "--chain-dir", str(tmp_path / ".chain"))
    assert survived, (rc, out, err)
    assert rc == 2, (rc, out, err)
    assert err.count("\n") == 1 and err.startswith("chain: error: local job record "), err
    assert f"1.json is corrupt: {why}" in err, err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("case", FOREIGN)
def test_a_process_chain_did_not_start_is_never_signalled(tmp_path: Path, command: list[str], case: str) -> None:
    record = _chain(tmp_path)
    rc, out, err, survived = _run_beside_sentinel(record, case, *command, "--chain-dir", str(tmp_path / ".chain"))
    assert survived and rc == 0 and err == "", (rc, out, err)
    job = json.loads(record.read_text())
    assert (job["state"], job["reason"]) == ("NODE_FAIL", "supervisor lost"), job  # the job is lost, said so
    if command == ["cancel"]:
        assert out.strip() == "chain chain-abcdef cancelled", out
