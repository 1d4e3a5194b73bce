"""Parsers on literal output of Slurm's clients, for each Slurm release the project runs on.

tests/unit/fixtures/slurm-<release>/<scenario>/ holds what ``sbatch --parsable``, ``squeue``,
``sacct`` (states, and usage) and ``scontrol show job`` printed for ONE real job, all captured
at the same moment of its life, unedited, by scripts/capture-slurm-fixtures: 22.05 on the
host's dev cluster (Debian 12), 24.11 and 26.05 on the dev cluster inside scripts/in-debian's
trixie and sid roots. Every scenario is checked on every release, against the same expectations
(a release printing something else fails here, by name). The last tests are small hand-made
cases of forms the captures do not show.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from chain.backends.slurm.parse import (
    parse_exit_code,
    parse_sacct,
    parse_sacct_usage,
    parse_sbatch_parsable,
    parse_scontrol,
    parse_slurm_timestamp,
    parse_squeue,
)
from chain.core.model import JobState

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"  # tests/unit/fixtures
RELEASES = ["22.05", "24.11", "26.05"]  # Debian 12 (host), 13 (trixie), sid
OUTPUTS = ["sbatch", "squeue", "sacct", "sacct-usage", "scontrol"]


@dataclass(frozen=True)
class Expect:
    """What every release's capture of a scenario must parse to."""

    state: JobState
    reason: str  # squeue's and scontrol's Reason ("" for None)
    sacct_exit: tuple[int | None, int | None]  # (code, signal) as sacct prints them
    scontrol_exit: tuple[int | None, int | None]  # the real ones
    started: bool = True
    cancelled_by: str | None = None
    limit: int = 120  # the job's time limit, seconds


SCENARIOS = {
    "completed": Expect(JobState.COMPLETED, "", (0, None), (0, None)),
    "failed-exit-3": Expect(JobState.FAILED, "NonZeroExitCode", (3, None), (3, None)),
    # sacct up to 24.11 shows an exit status of 128 or more minus 128 (26.05: whole, below);
    # scontrol keeps it.
    "exit-137": Expect(JobState.FAILED, "NonZeroExitCode", (9, None), (137, None)),
    "killed-by-signal-9": Expect(JobState.FAILED, "<by release>", (0, 9), (0, 9)),
    "cancelled-running": Expect(JobState.CANCELLED, "", (0, None), (0, 15), cancelled_by="0"),
    "timeout": Expect(JobState.TIMEOUT, "TimeLimit", (0, None), (0, 15), limit=60),
    "running": Expect(JobState.RUNNING, "", (0, None), (0, None)),
    "pending-held": Expect(JobState.PENDING, "JobHeldUser", (0, None), (0, None), started=False),
    "pending-dependency": Expect(JobState.PENDING, "Dependency", (0, None), (0, None), started=False),
}
# What differs between releases: the reason of a job killed by a signal, and sacct's
# exit status of 128 and more (26.05 no longer subtracts 128).
KILLED_REASON = {"22.05": "JobLaunchFailure", "24.11": "RaisedSignal:9(Killed)", "26.05": "RaisedSignal:9(Killed)"}
SACCT_EXIT_137 = {"22.05": (9, None), "24.11": (9, None), "26.05": (137, None)}


@dataclass(frozen=True)
class Capture:
    release: str
    scenario: str

    @property
    def dir(self) -> Path:
        return FIXTURES / f"slurm-{self.release}" / self.scenario

    def text(self, output: str) -> str:
        return (self.dir / f"{output}.txt").read_text()

    @property
    def job_id(self) -> str:
        return parse_sbatch_parsable(self.text("sbatch"))

    @property
    def expect(self) -> Expect:
        exp = SCENARIOS[self.scenario]
        if self.scenario == "killed-by-signal-9":
            return replace(exp, reason=KILLED_REASON[self.release])
        if self.scenario == "exit-137":
            return replace(exp, sacct_exit=SACCT_EXIT_137[self.release])
        return exp


CAPTURES = [
    pytest.param(Capture(release, scenario), id=f"{release}-{scenario}")
    for release in RELEASES
    for scenario in SCENARIOS
]


def test_every_release_has_every_scenario_captured_whole() -> None:
    for release in RELEASES:
        top = FIXTURES / f"slurm-{release}"
        info = (top / "capture-info.txt").read_text()
        assert info.splitlines()[0].split()[-1].startswith(release + "."), info
        assert sorted(p.name for p in top.iterdir() if p.is_dir()) == sorted(SCENARIOS)
        for scenario in SCENARIOS:
            capture = Capture(release, scenario)
            assert sorted(p.stem for p in capture.dir.iterdir()) == sorted(OUTPUTS), capture.dir
            # one job: every output names the job sbatch printed, and no other
            for output in ("squeue", "sacct", "sacct-usage"):
                ids = {line.split("|")[0].split(".")[0] for line in capture.text(output).splitlines()}
                assert ids == {capture.job_id}, (capture.dir, output)
            assert capture.text("scontrol").startswith(f"JobId={capture.job_id} "), capture.dir


@pytest.mark.parametrize("capture", CAPTURES)
def test_sbatch_parsable(capture: Capture) -> None:
    assert capture.job_id.isdigit()


@pytest.mark.parametrize("capture", CAPTURES)
def test_squeue(capture: Capture) -> None:
    exp = capture.expect
    jobs = parse_squeue(capture.text("squeue"))
    assert list(jobs) == [capture.job_id]
    job = jobs[capture.job_id]
    assert job.state is exp.state and job.source == "squeue"
    assert job.reason == exp.reason
    assert job.name == f"capture-{capture.scenario}"
    if not exp.started:
        assert job.start is None and job.end is None and job.state.active
        return
    assert job.start is not None and job.end is not None
    if exp.state is JobState.RUNNING:
        # a running job's end is its scheduled end: start + the time limit
        assert job.end - job.start == exp.limit and job.state.active
    else:
        assert job.state.finished and 0 <= job.end - job.start <= exp.limit + 60


@pytest.mark.parametrize("capture", CAPTURES)
def test_sacct(capture: Capture) -> None:
    exp = capture.expect
    jobs = parse_sacct(capture.text("sacct"))
    assert list(jobs) == [capture.job_id]
    job = jobs[capture.job_id]
    assert job.state is exp.state and job.source == "sacct"
    assert (job.exit_code, job.signal) == exp.sacct_exit
    assert job.cancelled_by == exp.cancelled_by
    assert job.name == f"capture-{capture.scenario}"
    # the same job at the same moment as squeue: same start, same end once it ended
    queued = parse_squeue(capture.text("squeue"))[capture.job_id]
    assert job.start == queued.start
    if exp.state is JobState.RUNNING:
        assert job.end is None  # sacct prints Unknown until the job ends
    else:
        assert job.end == queued.end


@pytest.mark.parametrize("capture", CAPTURES)
def test_scontrol(capture: Capture) -> None:
    exp = capture.expect
    jobs = parse_scontrol(capture.text("scontrol"))
    assert list(jobs) == [capture.job_id]
    job = jobs[capture.job_id]
    assert job.state is exp.state and job.source == "scontrol"
    assert (job.exit_code, job.signal) == exp.scontrol_exit
    assert job.reason == exp.reason
    assert job.name == f"capture-{capture.scenario}"
    queued = parse_squeue(capture.text("squeue"))[capture.job_id]
    assert (job.start, job.end) == (queued.start, queued.end)


@pytest.mark.parametrize("capture", CAPTURES)
def test_sacct_usage(capture: Capture) -> None:
    exp = capture.expect
    usage = parse_sacct_usage(capture.text("sacct-usage"))
    assert list(usage) == [capture.job_id]  # step lines fold into their job
    job = usage[capture.job_id]
    assert JobState.parse(job.state) is exp.state
    assert parse_exit_code(job.exit_code) == exp.sacct_exit
    assert job.submit is not None
    if not exp.started:
        assert (job.start, job.end, job.node) == (None, None, "")  # "None assigned"
        assert job.elapsed == 0 and job.max_rss is None
        return
    assert job.start is not None and job.submit <= job.start and job.node == "vm"
    assert job.alloc_cpus == 1 and job.cpu is not None and job.elapsed is not None
    if exp.state is JobState.RUNNING:
        assert job.end is None
    else:
        assert job.end is not None and abs(job.elapsed - (job.end - job.start)) <= 1
    if capture.scenario == "timeout":
        # the one job that lived past the 10 s accounting sample: its batch step's MaxRSS
        assert job.max_rss is not None and job.max_rss > 1024 * 1024


# ---- hand-made forms the captures do not show


def test_squeue_empty_output() -> None:
    assert parse_squeue("") == {}


def test_sacct_skips_steps() -> None:
    text = "20|COMPLETED|0:0|x|2026-11-29T07:49:12|2026-11-29T07:49:14\n20.batch|COMPLETED|0:0|batch||\n"
    assert list(parse_sacct(text)) == ["20"]


def test_sacct_node_fail_line() -> None:
    job = parse_sacct("16|NODE_FAIL|1:0|chain-ab12cd.r7|2026-11-29T07:53:00|2026-11-29T07:55:00\n")["16"]
    assert job.state is JobState.NODE_FAIL and job.state.finished and job.exit_code == 1


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


def test_a_slurm_timestamp_is_local_time_of_exactly_one_shape() -> None:
    import time as _time

    assert parse_slurm_timestamp(" 2026-11-29T08:01:02\n") == _time.mktime((2026, 11, 29, 8, 1, 2, 0, 0, -1))
    for other in (
        "2026-11-29",
        "2026-11-29T08:01:02+05:00",
        "2026-11-29T08:01:02.5",
        "20261129T080102",
        "2026-1-29T08:01:02",
        "2026-11-29T08:01:99",
        "२०२६-11-29T08:01:02",
        "Unknown",
        "",
    ):
        assert parse_slurm_timestamp(other) is None, other


def test_sacct_gives_a_running_jobs_end_as_its_start_plus_its_limit_only() -> None:
    """``sacct -X -n -P -j ID -o SACCT_FIELDS`` as 22.05 prints it: TimelimitRaw in minutes."""
    start = parse_slurm_timestamp("2026-12-05T11:55:11")
    assert start is not None

    def end(line: str, job: str = "9622") -> float | None:
        info = parse_sacct(line + "\n").get(job)
        return info.end if info is not None else None

    assert end("9622|RUNNING|0:0|c.r2|2026-12-05T11:55:11|Unknown|1") == start + 60
    assert end("9622|RUNNING|0:0|c.r2|2026-12-05T11:55:11|Unknown|UNLIMITED") is None
    assert end("9622|RUNNING|0:0|c.r2|2026-12-05T11:55:11|Unknown|99999999999999999999") is None
    assert end("9622|RUNNING|0:0|c.r2|2026-12-05T11:55:11|Unknown|\u00b2") is None  # a digit int() refuses
    assert end("9622|RUNNING|0:0|c.r2|2026-12-05T11:55:11|Unknown") is None  # captured without the limit
    assert end("9622|PENDING|0:0|c.r2|Unknown|Unknown|1") is None
    # an ended job keeps its real end; a requeued one's start is an earlier run's
    assert end("9622|COMPLETED|0:0|c.r2|2026-12-05T11:55:11|2026-12-05T11:55:41|1") == start + 30
    assert end("9622|REQUEUED|0:0|c.r2|2026-12-05T11:55:11|2026-12-05T11:55:41|1") == start + 30
    assert end("9623|RUNNING|0:0|c.r2|2026-12-05T11:55:11|Unknown|1") is None
