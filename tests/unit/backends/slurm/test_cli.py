"""``chain.backends.slurm.cli``: the Slurm commands the CLI backend runs for a query, and under daemon
outages (fault suite, tests/faults): slurmdbd down -> one sacct try, then
scontrol; slurmctld down -> end_time gives up after one try (the caller uses
the configured limit)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from chain.backends.slurm.cli import SlurmCliBackend
from chain.backends.slurm.parse import SACCT_FIELDS, parse_slurm_timestamp
from chain.core.model import JobState
from chain.core.retry import RetryPolicy
from chain.errors import SchedulerError

DBD_DOWN = (
    "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to "
    "host:localhost:6819: Connection refused\nsacct: error: Problem talking to the database: "
    "Connection refused"
)
CTLD_DOWN = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


class Fake:
    def __init__(self, answers: dict[str, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv[0])
        rc, out, err = self.answers[argv[0]]
        return subprocess.CompletedProcess(list(argv), rc, out, err)


def backend(fake: Fake) -> SlurmCliBackend:
    return SlurmCliBackend(retry=RetryPolicy(attempts=8, sleep=lambda s: None), run=fake)


SQUEUE_ENDED = (
    "42|TIMEOUT|TimeLimit|chain-x.r1|2026-01-01T00:00:00|2026-01-01T00:00:20\n"
    "43|PENDING|Dependency|chain-x.r2|N/A|N/A\n"
)
SCONTROL_ENDED = (
    "JobId=42 JobName=chain-x.r1 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 "
    "StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T00:00:20\n"
)
SACCT_ENDED = "42|TIMEOUT|0:15|chain-x.r1|2026-01-01T00:00:00|2026-01-01T00:00:20\n"
INVALID = (1, "", "slurm_load_jobs error: Invalid job id specified")


def test_an_ended_job_squeue_still_shows_needs_no_sacct_without_exit_codes() -> None:
    fake = Fake({"squeue": (0, SQUEUE_ENDED, ""), "sacct": (0, SACCT_ENDED, "")})
    assert backend(fake).query(["42", "43"], exit_codes=False)["42"].state is JobState.TIMEOUT
    assert fake.calls == ["squeue"]
    assert backend(fake).query(["42", "43"])["42"].state is JobState.TIMEOUT
    assert fake.calls == ["squeue", "squeue", "sacct"]


def test_one_job_is_asked_with_scontrol_whose_answer_is_not_asked_again() -> None:
    """One id: ``scontrol show job`` (2 slurmctld RPCs; ``squeue -j ID`` costs
    3, the partitions too); an ended job's exit code from accounting, else
    from that same answer, never a second scontrol."""
    fake = Fake({"scontrol": (0, SCONTROL_ENDED, ""), "sacct": (0, SACCT_ENDED, "")})
    info = backend(fake).query(["42"], exit_codes=False)["42"]
    assert (info.state, info.name, info.source) == (JobState.TIMEOUT, "chain-x.r1", "scontrol")
    assert fake.calls == ["scontrol"]
    assert backend(fake).query(["42"])["42"].source == "sacct"
    assert fake.calls == ["scontrol", "scontrol", "sacct"]
    fake = Fake({"scontrol": (0, SCONTROL_ENDED, ""), "sacct": (1, "", DBD_DOWN)})
    info = backend(fake).query(["42"])["42"]
    assert (info.state, info.signal, info.source) == (JobState.TIMEOUT, 15, "scontrol")
    assert fake.calls == ["scontrol", "sacct"]


def test_one_job_not_ended_has_no_exit_code_though_scontrol_prints_0_0() -> None:
    """The backend contract: a pending job's exit code is unknown (22.05's scontrol prints 0:0)."""
    pending = "JobId=43 JobName=chain-x.r2 JobState=PENDING Reason=Dependency ExitCode=0:0 Restarts=0\n"
    info = backend(Fake({"scontrol": (0, pending, "")})).query(["43"])["43"]
    assert (info.state, info.exit_code, info.signal) == (JobState.PENDING, None, None)


def test_a_job_squeue_no_longer_shows_is_looked_up_in_accounting_even_without_exit_codes() -> None:
    fake = Fake(
        {
            "scontrol": INVALID,
            "sacct": (0, "42|COMPLETED|0:0|chain-x.r1|2026-01-01T00:00:00|2026-01-01T00:00:20\n", ""),
        }
    )
    assert backend(fake).query(["42"], exit_codes=False)["42"].state is JobState.COMPLETED
    assert fake.calls == ["scontrol", "sacct"]


def test_slurmdbd_down_one_sacct_try_then_scontrol() -> None:
    fake = Fake(
        {
            "squeue": (0, SQUEUE_ENDED.replace("TIMEOUT|TimeLimit", "COMPLETED|None"), ""),
            "sacct": (1, "", DBD_DOWN),
            "scontrol": (0, "JobId=42 JobName=chain-x.r1\n   JobState=COMPLETED Reason=None ExitCode=0:0\n", ""),
        }
    )
    info = backend(fake).query(["42", "43"])["42"]
    assert info.state is JobState.COMPLETED
    assert fake.calls == ["squeue", "sacct", "scontrol"]


def test_job_only_accounting_knows_still_gets_the_retry_budget() -> None:
    fake = Fake({"scontrol": INVALID, "sacct": (1, "", DBD_DOWN)})
    assert backend(fake).query(["42"]) == {}
    assert fake.calls.count("sacct") == 1 + 8


def test_end_time_gives_up_after_one_try_when_slurmctld_is_down() -> None:
    fake = Fake({"sacct": (1, "", DBD_DOWN), "scontrol": (1, "", CTLD_DOWN)})
    with pytest.raises(SchedulerError):
        backend(fake).end_time("42")
    assert fake.calls == ["sacct", "scontrol"]


def test_end_time_from_accounting_costs_slurmctld_nothing() -> None:
    """A running job's start and limit in accounting give its end; not yet
    started there (or no accounting): one scontrol."""
    from chain.backends.slurm.parse import parse_slurm_timestamp

    fake = Fake({"sacct": (0, "42|RUNNING|0:0|c.r1|2026-01-01T00:00:00|Unknown|15\n", "")})
    start = parse_slurm_timestamp("2026-01-01T00:00:00")
    assert start is not None and backend(fake).end_time("42") == start + 900
    assert fake.calls == ["sacct"]
    running = "JobId=42 JobName=x JobState=RUNNING Reason=None EndTime=2026-01-01T00:15:00\n"
    fake = Fake({"sacct": (0, "42|PENDING|0:0|c.r1|Unknown|Unknown|15\n", ""), "scontrol": (0, running, "")})
    assert backend(fake).end_time("42") == start + 900
    assert fake.calls == ["sacct", "scontrol"]


def test_accounted_is_one_sacct_try_and_none_without_accounting() -> None:
    fake = Fake({"sacct": (0, "43|CANCELLED by 0|0:0|chain-x.r2|None|2026-01-01T00:00:20\n", "")})
    assert backend(fake).accounted(["43"])["43"].state is JobState.CANCELLED  # type: ignore[index]
    assert backend(fake).accounted([]) == {}
    fake = Fake({"sacct": (1, "", "Slurm accounting storage is disabled")})
    assert backend(fake).accounted(["43"]) is None
    assert fake.calls == ["sacct"]


def test_accounted_later_runs_sacct_when_the_answer_is_asked_with_a_given_run() -> None:
    fake = Fake({"sacct": (0, "43|CANCELLED by 0|0:0|chain-x.r2|None|2026-01-01T00:00:20\n", "")})
    answer = backend(fake).accounted_later(["43"])
    assert fake.calls == []
    first = answer()
    assert first is not None and first["43"].state is JobState.CANCELLED
    assert answer() is first and fake.calls == ["sacct"]  # asked once
    assert backend(fake).accounted_later([])() == {}
    fake = Fake({"sacct": (1, "", DBD_DOWN)})
    assert backend(fake).accounted_later(["43"])() is None
    with pytest.raises(SchedulerError, match="not a Slurm job id"):
        backend(fake).accounted_later(["43", "-S"])


def _sacct_on_path(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``sacct`` on PATH that notes its arguments in ``started`` and runs ``body``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sacct = bin_dir / "sacct"
    sacct.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/started\n{body}\n')
    sacct.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path / "started"


def test_accounted_later_starts_sacct_at_once_and_waits_for_it_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real client: started by the call (its answer comes while the
    caller works), the same request as ``accounted``'s, read when asked."""
    release = tmp_path / "release"
    started = _sacct_on_path(
        tmp_path,
        f"while [ ! -e {release} ]; do sleep 0.01; done\n"
        "echo '42|RUNNING|0:0|chain-x.r1|2026-01-01T00:00:00|Unknown|15'",
        monkeypatch,
    )
    answer = SlurmCliBackend().accounted_later(["42", "41"])
    for _ in range(500):  # the client runs before anyone asks for its answer
        if started.exists() and started.read_text():
            break
        time.sleep(0.01)
    assert started.read_text().split() == ["-X", "-n", "-P", "-j", "42,41", "-o", SACCT_FIELDS]
    release.touch()
    known = answer()
    start = parse_slurm_timestamp("2026-01-01T00:00:00")
    assert known is not None and known["42"].state is JobState.RUNNING and start is not None
    assert known["42"].end == start + 900 and answer() is known


@pytest.mark.parametrize("body", ["echo 'sacct: error: Problem talking to the database' >&2; exit 1", "exit 0"])
def test_accounted_later_gives_none_or_nothing_as_accounted_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    _sacct_on_path(tmp_path, body, monkeypatch)
    assert SlurmCliBackend().accounted_later(["42"])() == (None if "exit 1" in body else {})


def test_a_wait_for_a_started_client_that_is_interrupted_takes_the_client_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``subprocess.run`` does: no sacct left running behind a ^C."""
    _sacct_on_path(tmp_path, "sleep 30", monkeypatch)
    started: list[subprocess.Popen[str]] = []

    class Interrupted(subprocess.Popen[str]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

        def communicate(self, *args: Any, **kwargs: Any) -> tuple[str, str]:
            raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", Interrupted)
    answer = SlurmCliBackend().accounted_later(["42"])
    with pytest.raises(KeyboardInterrupt):
        answer()
    assert len(started) == 1 and started[0].returncode is not None  # killed and reaped


def test_accounted_later_without_sacct_on_path_is_no_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert SlurmCliBackend().accounted_later(["42"])() is None


def test_the_submitter_rides_out_an_outage_until_its_own_end() -> None:
    """RetryPolicy.until: any SchedulerError is repeated on the caller's
    clock, backing off, until there is no time left; then it is raised."""
    from chain.core.retry import RetryPolicy
    from chain.errors import SchedulerError

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    calls = [0]

    def down() -> str:
        calls[0] += 1
        raise SchedulerError("sbatch: error: Batch job submission failed: Unable to contact slurm controller")

    policy = RetryPolicy.until(lambda: now[0] + 60 >= 600, sleep)
    with pytest.raises(SchedulerError):
        policy.call(down)
    assert calls[0] == len(slept) + 1 and 540 <= now[0] + 60 and now[0] < 600
    assert all(0 <= s <= 60 for s in slept) and len(slept) >= 9

    calls[0] = 0
    answers = iter([SchedulerError("Socket timed out on send/recv operation"), None])

    def flaky() -> str:
        calls[0] += 1
        err = next(answers)
        if err:
            raise err
        return "42"

    assert RetryPolicy.until(lambda: False, lambda s: None).call(flaky) == "42" and calls[0] == 2
