"""The rule that decides what the
local backend may signal (``procs``), the spool's record validation and its
job-id allocation (``spool``)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from chain.backends.local.backend import LocalBackend
from chain.backends.local.spool import JobRecord, Spool, kill_job_group, next_job_id
from chain.core import names
from chain.core.model import JobState
from chain.errors import ChainDirError, SchedulerError
from chain.primitives.codec import RecordError
from chain.primitives.procs import Caller, Proc, mismatch, refusal, start_ticks

pytestmark = pytest.mark.timeout(60)

ME = Caller(pid=500, pgrp=500, uid=1000, boot="b1")


def _proc(pid: int = 4242, ticks: int = 77, uid: int = 1000, pgrp: int = 4242, zombie: bool = False) -> Proc:
    return Proc(pid, ticks, uid, pgrp, zombie)


@pytest.mark.parametrize(
    ("pid", "ticks", "boot", "found", "group", "why"),
    [
        (None, 77, "b1", None, False, "pid None is no job's"),
        (0, 77, "b1", _proc(), True, "pid 0 is no job's"),
        (-5, 77, "b1", _proc(), True, "pid -5 is no job's"),
        (1, 77, "b1", _proc(pid=1), False, "pid 1 is no job's"),
        (4242, None, "b1", _proc(), True, "no start time recorded for pid 4242"),
        (4242, 77, "b0", _proc(), True, "pid 4242 was recorded before a reboot"),
        (4242, 77, "b1", None, True, "process 4242 has ended"),
        (4242, 76, "b1", _proc(), True, "pid 4242 is another process now (started at tick 77, not 76)"),
        (500, 77, "b1", _proc(pid=500, pgrp=500), True, "process 500 is in chain's own process group"),
        (4242, 77, "b1", _proc(pgrp=500), False, "process 4242 is in chain's own process group"),
        (4242, 77, "b1", _proc(uid=0), False, "process 4242 is another user's"),
        (4242, 77, "b1", _proc(pgrp=4000), True, "process 4242 leads no process group"),
        (4242, 77, "b1", _proc(pgrp=4000), False, ""),  # a process of a job: may be signalled alone
        (4242, 77, "b1", _proc(), True, ""),  # the batch shell recorded, leader of its group
        (4242, 77, None, _proc(zombie=True), True, ""),  # not reaped yet: its group id is still the job's
    ],
)
def test_the_rule(
    pid: int | None, ticks: int | None, boot: str | None, found: Proc | None, group: bool, why: str
) -> None:
    assert refusal(pid, ticks, boot, found, ME, group=group) == why


def test_running_is_whoever_asks_but_never_the_callers_group() -> None:
    assert mismatch(4242, 77, "b1", _proc(uid=0), ME) == ""  # root's process: running, not signalled
    assert mismatch(4242, 77, "b1", _proc(pgrp=500), ME) == "process 4242 is in chain's own process group"


def test_start_ticks_are_a_zombies_too() -> None:
    proc = subprocess.Popen(["true"])
    while (found := Proc.read(proc.pid)) is not None and not found.zombie:
        time.sleep(0.01)
    assert found is not None and start_ticks(proc.pid) == found.ticks  # exited, not reaped: still recorded
    proc.wait()
    assert Proc.read(proc.pid) is None and start_ticks(proc.pid) is None


def _record(**fields: object) -> dict[str, object]:
    """Job 3's record as chain writes it, with ``fields`` laid over it."""
    record = JobRecord(
        job_id="3",
        name="n",
        user="u",
        batch_script="/s/jobs/3.sh",
        script="/x.sbatch",
        submit_dir="/w",
        work_dir="/w",
        stdout="/w/o",
        stderr="/w/o",
        open_mode="append",
        dependency=None,
        time_limit=60.0,
        time_limit_text="1",
        time_scale=1.0,
        kill_wait=1.0,
        env={"A": "1"},
        submit_time=1.0,
    )
    return {**record.to_json(), **fields}


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"batch_pid": 0}, "bad batch_pid 0"),
        ({"supervisor_pid": -5}, "bad supervisor_pid -5"),
        ({"batch_ticks": -1}, "bad batch_ticks -1"),
        ({"batch_pid": 12.5}, "bad batch_pid 12.5"),
        ({"state": "SLEEPING"}, "bad state 'SLEEPING'"),
        ({"env": {"A": 1}}, "bad env {'A': 1}"),
        ({"time_scale": 0}, "bad time_scale, kill_wait or time_limit"),
        ({"job_id": "4"}, "job_id '4' is not '3'"),
        ({"job_id": "1" * 13}, "job_id '1111111111111' is not '3'"),
        ({"submit_time": None}, "bad submit_time None"),
    ],
)
def test_a_record_chain_never_writes_is_refused_with_its_field(fields: dict[str, object], why: str) -> None:
    with pytest.raises(RecordError) as err:
        JobRecord.from_json(_record(**fields), "3")
    assert str(err.value) == why


def test_a_newer_versions_fields_are_kept() -> None:
    record = JobRecord.from_json(_record(gpus="2"), "3")
    assert record.extra == {"gpus": "2"} and record.to_json()["gpus"] == "2"


@pytest.mark.parametrize("text", ["", "{", "[]", '{"job_id": "3"}'])
def test_a_corrupt_record_file_is_one_chain_dir_error(tmp_path: Path, text: str) -> None:
    spool = Spool(tmp_path)
    spool.ensure()
    spool.record_path("3").write_text(text)
    with pytest.raises(ChainDirError, match=r"^local job record .*3\.json is corrupt: ") as err:
        spool.read("3")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("counter", "taken", "expected"),
    [
        ("", [], "1"),
        ("41\n", ["40", "41"], "42"),
        ("999999999999999\n", ["7"], "8"),  # 15 digits: not an id, recovered from the records
        ("garbage", ["2", "10", "9"], "11"),
        ("3", ["10"], "11"),  # behind the records (restored from a backup): never an id twice
        ("5", ["x.json", "1" * 13], "6"),  # what is not an id is no record
    ],
)
def test_the_next_job_id(counter: str, taken: list[str], expected: str) -> None:
    assert next_job_id(counter, taken) == expected


def test_twelve_digits_used_up_is_one_clear_error() -> None:
    with pytest.raises(SchedulerError, match="job ids are used up"):
        next_job_id("999999999999", [])


def test_a_15_digit_counter_gives_an_id_chain_accepts(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "spool", kill_wait=0.5)
    backend.spool.ensure()
    (backend.spool.root / "counter").write_text("999999999999999\n")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    job_id = backend.submit(script, job_name="j", cwd=tmp_path)
    assert names.JOB_ID.fullmatch(job_id) and job_id == "1"
    assert (backend.spool.root / "counter").read_text() == "1\n"
    assert backend.query([job_id])[job_id].job_id == job_id


def _job_of(spool: Spool, pid: int, ticks: int | None) -> JobRecord:
    """A RUNNING job whose supervisor is gone and whose batch shell is ``pid``."""
    data = _record(state="RUNNING", start=1.0, supervisor_pid=2**22 + 1, supervisor_ticks=1)
    data.update(batch_pid=pid, batch_ticks=ticks)
    spool.ensure()
    spool.record_path("3").write_text(json.dumps(data))
    record = spool.read("3")
    assert record is not None
    return record


@pytest.mark.parametrize("ticks", ["none", "other", "true"])
def test_a_lost_job_is_killed_only_when_its_batch_shell_is_the_one_recorded(tmp_path: Path, ticks: str) -> None:
    """The positive control beside the refusals: a process of this user in a
    group of its own, named by a record of a lost job, is killed exactly
    when the record has its true start time."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        true_ticks = start_ticks(proc.pid)
        assert true_ticks is not None
        recorded = {"none": None, "other": true_ticks + 1, "true": true_ticks}[ticks]
        spool = Spool(tmp_path)
        _job_of(spool, proc.pid, recorded)
        record = spool.refresh("3")
        assert record is not None and (record.state, record.reason) == (JobState.NODE_FAIL, "supervisor lost")
        time.sleep(0.2)
        assert (proc.poll() == -signal.SIGKILL) == (ticks == "true"), proc.poll()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_kill_job_group_says_why_not(tmp_path: Path) -> None:
    record = _job_of(Spool(tmp_path), 2**22 + 3, 5)
    assert kill_job_group(record, signal.SIGKILL) == f"process {2**22 + 3} has ended"
