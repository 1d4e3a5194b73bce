"""Parsers on literal output of Slurm 22.05's clients (captured on the dev cluster)."""

from chain.backends.slurm.parse import (
    parse_exit_code,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol,
    parse_slurm_timestamp,
    parse_squeue,
)
from chain.core.model import JobState

SQUEUE = """\
10|PENDING|None|parse-test|N/A|N/A
11|RUNNING|None|chain-ab12cd.r3|2026-11-29T07:49:12|2026-11-29T07:50:12
12|FAILED|NonZeroExitCode|parse-test|2026-11-29T07:49:12|2026-11-29T07:49:14
"""

SACCT = """\
10|FAILED|9:0|parse-test|2026-11-29T07:49:12|2026-11-29T07:49:14
13|CANCELLED by 0|0:15|chain-ab12cd.r4|2026-11-29T07:50:00|2026-11-29T07:50:09
14|TIMEOUT|0:0|chain-ab12cd.r5|2026-11-29T07:51:00|2026-11-29T07:52:01
15|RUNNING|0:0|chain-ab12cd.r6|2026-11-29T07:53:00|Unknown
16|NODE_FAIL|1:0|chain-ab12cd.r7|2026-11-29T07:53:00|2026-11-29T07:55:00
"""

SCONTROL = """\
JobId=10 JobName=parse-test
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901750 Nice=0 Account=root QOS=normal
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=137:0
   RunTime=00:00:02 TimeLimit=00:01:00 TimeMin=N/A
   SubmitTime=2026-11-29T07:49:12 EligibleTime=2026-11-29T07:49:12
   AccrueTime=2026-11-29T07:49:12
   StartTime=2026-11-29T07:49:12 EndTime=2026-11-29T07:49:14 Deadline=N/A
"""


def test_squeue_states_all() -> None:
    jobs = parse_squeue(SQUEUE)
    assert jobs["10"].state is JobState.PENDING and jobs["10"].start is None and jobs["10"].reason == ""
    assert jobs["11"].state is JobState.RUNNING and jobs["11"].name == "chain-ab12cd.r3"
    end, start = jobs["11"].end, jobs["11"].start
    assert end is not None and start is not None and end - start == 60
    assert jobs["12"].state is JobState.FAILED and jobs["12"].state.finished
    assert jobs["12"].reason == "NonZeroExitCode"


def test_squeue_empty_output() -> None:
    assert parse_squeue("") == {}


def test_sacct_exit_codes_and_states() -> None:
    jobs = parse_sacct(SACCT)
    # a script exiting 137 shows 9:0 in sacct (minus 128)
    assert (jobs["10"].state, jobs["10"].exit_code, jobs["10"].signal) == (JobState.FAILED, 9, None)
    assert jobs["13"].state is JobState.CANCELLED and jobs["13"].cancelled_by == "0" and jobs["13"].signal == 15
    assert jobs["14"].state is JobState.TIMEOUT and jobs["14"].exit_code == 0
    assert jobs["15"].state is JobState.RUNNING and jobs["15"].end is None and jobs["15"].state.active
    assert jobs["16"].state is JobState.NODE_FAIL


def test_sacct_skips_steps() -> None:
    text = "20|COMPLETED|0:0|x|2026-11-29T07:49:12|2026-11-29T07:49:14\n20.batch|COMPLETED|0:0|batch||\n"
    assert list(parse_sacct(text)) == ["20"]


def test_scontrol_keeps_real_exit_code() -> None:
    job = parse_scontrol(SCONTROL)["10"]
    assert (job.state, job.exit_code, job.reason) == (JobState.FAILED, 137, "NonZeroExitCode")
    assert job.end is not None and job.start is not None and job.end - job.start == 2


def test_scontrol_one_line_form() -> None:
    text = "JobId=7 JobName=a UserId=root(0) JobState=CANCELLED Reason=None ExitCode=0:15 StartTime=Unknown\n"
    job = parse_scontrol(text)["7"]
    assert job.state is JobState.CANCELLED and job.signal == 15 and job.start is None


def test_small_parsers() -> None:
    assert parse_sbatch_parsable("1234\n") == "1234"
    assert parse_sbatch_parsable("1234;cluster\n") == "1234"
    assert parse_exit_code("3:0") == (3, None) and parse_exit_code("junk") == (None, None)
    assert parse_slurm_timestamp("Unknown") is None and parse_slurm_timestamp("N/A") is None
    assert JobState.parse("CANCELLED by 1000") is JobState.CANCELLED
    assert JobState.parse("CD") is JobState.COMPLETED and JobState.parse("weird") is JobState.UNKNOWN
