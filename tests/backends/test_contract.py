"""The backend contract: one suite, run on every backend that can run here.

The cases are written once, in ``Contract``; each backend is one subclass
whose ``target`` fixture builds it:

- ``TestLocal``: the embedded local backend (tmp spool, scaled time), always;
- ``TestSlurmCli``: the Slurm CLI backend on the dev cluster; its fixture
  requests ``slurm_cluster``, so its cases carry the ``slurm`` marker;
- ``TestPyslurm``: the pyslurm backend on the real pyslurm, where one built
  for the running Slurm's release imports (``bash scripts/setup --pyslurm``);
  elsewhere its cases skip with the reason, and fail under CI=true (the
  ``real_pyslurm`` fixture in conftest.py);
- ``TestPyslurmBackendOnStandIn``: the pyslurm backend's code driving a
  CLI-backed stand-in of pyslurm's API, wherever the dev cluster runs.

Job scripts live in tmp dirs, ask ``--time=1`` (whole minutes on Slurm) and
sleep briefly; every wait is bounded and every job left running is cancelled
at teardown.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from chain.backends.base import Backend, JobInfo, JobState, JobUsage
from chain.backends.local.backend import LocalBackend
from chain.backends.slurm.cli import SlurmCliBackend
from chain.core.retry import RetryPolicy
from chain.errors import BackendUnavailable, SchedulerError

pytestmark = pytest.mark.timeout(120)

UNKNOWN_ID = "9000000"  # far beyond any id the dev cluster or a tmp spool hands out


@dataclass
class Target:
    """A backend under test plus what the cases need to drive it."""

    backend: Backend
    workdir: Path
    time_scale: float  # real seconds per second of --time
    timeout: float  # bound of every wait
    submitted: list[str] = field(default_factory=list)

    def script(self, body: str, name: str = "job.sh") -> Path:
        path = self.workdir / name
        path.write_text(f"#!/bin/bash\n#SBATCH --time=1\n{body.strip()}\n")
        return path

    def submit(
        self, body: str, *, name: str | None = None, dependency: str | None = None, script_name: str = "job.sh"
    ) -> str:
        job_name = name or f"contract-{uuid.uuid4().hex[:10]}"
        job_id = self.backend.submit(
            self.script(body, script_name), job_name=job_name, dependency=dependency, cwd=self.workdir
        )
        self.submitted.append(job_id)
        return job_id

    def wait(self, job_id: str, done: Callable[[JobInfo], bool], what: str) -> JobInfo:
        deadline = time.monotonic() + self.timeout
        info: JobInfo | None = None
        while time.monotonic() < deadline:
            info = self.backend.query([job_id]).get(job_id)
            if info is not None and done(info):
                return info
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not {what} within {self.timeout} s: last {info}")

    def finished(self, job_id: str) -> JobInfo:
        return self.wait(job_id, lambda i: i.state.finished, "finished")

    def running(self, job_id: str) -> JobInfo:
        return self.wait(job_id, lambda i: i.state is JobState.RUNNING, "running")

    def file(self, path: Path) -> str:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().strip():
                return path.read_text()
            time.sleep(0.1)
        raise AssertionError(f"{path} not written within {self.timeout} s")

    def usage(self, job_id: str) -> JobUsage:
        """The job's final accounting record (it reaches slurmdbd asynchronously)."""
        deadline = time.monotonic() + self.timeout
        found: JobUsage | None = None
        while time.monotonic() < deadline:
            found = self.backend.usage([job_id]).get(job_id)
            if found is not None and found.final:
                return found
            time.sleep(0.5)
        raise AssertionError(f"no final usage record of job {job_id} within {self.timeout} s: {found}")

    def cleanup(self) -> None:
        active = [j for j, i in self.backend.query(self.submitted).items() if i.state.active]
        for job_id in active:
            self.backend.cancel(job_id)


def _target(backend: Backend, workdir: Path, *, time_scale: float, timeout: float) -> Iterator[Target]:
    target = Target(backend, workdir, time_scale, timeout)
    try:
        yield target
    finally:
        target.cleanup()


class Contract:
    """The cases every backend must pass (not collected itself: no Test prefix)."""

    def test_submit_is_active_then_completed_exit_0(self, target: Target) -> None:
        job = target.submit("sleep 2; echo hello")
        first = target.backend.query([job])[job]
        assert first.state in (JobState.PENDING, JobState.RUNNING, JobState.CONFIGURING)
        assert first.exit_code is None or first.state is not JobState.PENDING
        info = target.finished(job)
        assert (info.state, info.exit_code) == (JobState.COMPLETED, 0)
        assert info.job_id == job

    def test_exit_3_is_failed_with_exit_code_3(self, target: Target) -> None:
        job = target.submit("exit 3")
        info = target.finished(job)
        assert (info.state, info.exit_code) == (JobState.FAILED, 3)

    def test_an_ended_job_keeps_its_final_state_when_asked_without_exit_codes(self, target: Target) -> None:
        job = target.submit("exit 3")
        target.finished(job)
        info = target.backend.query([job], exit_codes=False)[job]
        assert info.state is JobState.FAILED and info.exit_code in (None, 3)

    def test_find_by_name_finds_the_job(self, target: Target) -> None:
        name = f"contract-find-{uuid.uuid4().hex[:10]}"
        job = target.submit("sleep 20", name=name)
        assert target.backend.find_by_name(name) == [job]
        assert target.backend.find_by_name(f"{name}-nobody") == []
        assert target.backend.query([job])[job].name == name

    def test_cancel_running_job_is_cancelled(self, target: Target) -> None:
        job = target.submit("sleep 60")
        target.running(job)
        target.backend.cancel(job)
        info = target.finished(job)
        assert info.state is JobState.CANCELLED

    def test_cancel_with_signal_reaches_batch_script_and_job_keeps_running(self, target: Target) -> None:
        got, ready, stop = (target.workdir / n for n in ("got", "ready", "stop"))
        job = target.submit(f"""
            trap 'echo usr1 >> {got}' USR1
            touch {ready}
            while [ ! -e {stop} ]; do sleep 0.1; done
            echo done >> {got}
        """)
        target.running(job)
        _wait_exists(ready, target.timeout)  # the trap is set
        target.backend.cancel(job, signal="USR1")
        assert target.file(got) == "usr1\n"
        assert target.backend.query([job])[job].state is JobState.RUNNING
        stop.touch()
        info = target.finished(job)
        assert (info.state, info.exit_code) == (JobState.COMPLETED, 0)
        assert got.read_text() == "usr1\ndone\n"

    def test_end_time_of_running_job_is_within_its_time_limit(self, target: Target) -> None:
        job = target.submit("sleep 60")
        target.running(job)
        now = time.time()
        end = target.backend.end_time(job)
        limit = 60 * target.time_scale  # --time=1
        assert end is not None
        # squeue prints whole seconds: allow one either way.
        assert now - 1 <= end <= now + limit + 1

    def test_query_of_unknown_id_has_no_entry(self, target: Target) -> None:
        assert target.backend.query([UNKNOWN_ID]) == {}
        job = target.submit("sleep 20")
        assert set(target.backend.query([job, UNKNOWN_ID])) == {job}
        assert target.backend.end_time(UNKNOWN_ID) is None

    def test_afterany_dependency_starts_second_only_after_first_ended(self, target: Target) -> None:
        first_end, second_start = target.workdir / "first_end", target.workdir / "second_start"
        first = target.submit(f"sleep 3; date +%s.%N > {first_end}; exit 1", script_name="first.sh")
        second = target.submit(f"date +%s.%N > {second_start}", dependency=f"afterany:{first}", script_name="second.sh")
        target.running(first)
        waiting = target.backend.query([second])[second]
        assert waiting.state is JobState.PENDING
        assert target.finished(first).state is JobState.FAILED  # afterany: any end will do
        info = target.finished(second)
        assert (info.state, info.exit_code) == (JobState.COMPLETED, 0)
        assert float(second_start.read_text()) >= float(first_end.read_text())

    def test_usage_of_a_finished_job(self, target: Target) -> None:
        job = target.submit("sleep 1")
        info = target.finished(job)
        usage = target.usage(job)
        assert (usage.job_id, usage.state, usage.exit_code) == (job, "COMPLETED", "0:0")
        assert usage.submit is not None and usage.start is not None and usage.end is not None
        assert usage.submit <= usage.start <= usage.end and usage.elapsed is not None
        assert abs(usage.elapsed - (usage.end - usage.start)) <= 1  # sacct: whole seconds
        assert info.start is not None and abs(usage.start - info.start) <= 1
        assert usage.node
        # the scheduler's accounting knows the allocated CPUs; a backend's own records do not
        assert (usage.alloc_cpus is not None and usage.alloc_cpus >= 1) == target.backend.accounting
        assert UNKNOWN_ID not in target.backend.usage([job, UNKNOWN_ID])


def _wait_exists(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not created within {timeout} s")
        time.sleep(0.05)


class TestLocal(Contract):
    @pytest.fixture
    def target(self, tmp_path: Path) -> Iterator[Target]:
        scale = 0.5  # --time=1 is 30 s: far beyond every case's sleeps
        backend = LocalBackend(tmp_path / "spool", kill_wait=0.5, time_scale=scale)
        work = tmp_path / "work"
        work.mkdir()
        yield from _target(backend, work, time_scale=scale, timeout=20.0)


# Quick retries: a case must not wait out the production retry budget.
_TEST_RETRY = RetryPolicy(attempts=3, max_delay=10.0, initial=0.5, maximum=2.0)


class TestSlurmCli(Contract):
    @pytest.fixture
    def target(self, tmp_path: Path, slurm_cluster: object) -> Iterator[Target]:
        yield from _target(SlurmCliBackend(retry=_TEST_RETRY), tmp_path, time_scale=1.0, timeout=60.0)


class TestPyslurmBackendOnStandIn(Contract):
    """The pyslurm backend's own code, driving a CLI-backed stand-in of pyslurm's API
    (tests/backends/conftest.py) on the dev cluster. Not evidence about pyslurm itself."""

    @pytest.fixture
    def target(
        self, tmp_path: Path, slurm_cluster: object, cli_pyslurm_module: Callable[[str], ModuleType]
    ) -> Iterator[Target]:
        from chain.backends.slurm.pyslurm import PyslurmBackend
        from chain.backends.slurm.pyslurm_load import running_slurm_version

        slurm = running_slurm_version()
        assert slurm is not None
        backend = PyslurmBackend(retry=_TEST_RETRY, module=cli_pyslurm_module(slurm), slurm_version=slurm)
        yield from _target(backend, tmp_path, time_scale=1.0, timeout=60.0)


class TestPyslurm(Contract):
    """The real pyslurm (not imported at collection: where libslurm finds no
    configuration, ``import pyslurm`` ends the process)."""

    @pytest.fixture
    def target(self, tmp_path: Path, real_pyslurm: str) -> Iterator[Target]:
        from chain.backends.slurm.pyslurm import PyslurmBackend

        yield from _target(PyslurmBackend(retry=_TEST_RETRY), tmp_path, time_scale=1.0, timeout=60.0)

    def test_sbatch_lines_pyslurm_itself_cannot_read_reach_slurm(self, target: Target) -> None:
        """--partition (pyslurm's own reader fails on it), a quoted output path
        with a blank, `-t 2`, --mem and --time-min: the job gets each."""
        partition = (
            subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30, check=True)
            .stdout.split()[0]
            .rstrip("*")
        )
        script = target.workdir / "opts.sh"
        script.write_text(
            f"#!/bin/bash\n#SBATCH --partition={partition} -t 2\n"
            "#SBATCH --output='out %j.txt' --mem=64M\n#SBATCH --time-min 0:30\n"
            "echo hello\n"
        )
        job = target.backend.submit(script, job_name=f"contract-opts-{uuid.uuid4().hex[:8]}", cwd=target.workdir)
        target.submitted.append(job)
        shown = subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        for want in (
            f"Partition={partition}",
            "TimeLimit=00:02:00",
            "TimeMin=00:01:00",
            "MinMemoryNode=64M",
            f"StdOut={target.workdir}/out {job}.txt",
        ):
            assert want in shown, shown
        assert target.finished(job).state is JobState.COMPLETED
        assert target.file(target.workdir / f"out {job}.txt") == "hello\n"

    def test_an_option_pyslurm_has_no_setting_for_is_refused_in_one_line(self, target: Target) -> None:
        script = target.script("#SBATCH --no-such-option=1\ntrue", "bad.sh")
        with pytest.raises(SchedulerError) as caught:
            target.backend.submit(script, job_name="contract-never", cwd=target.workdir)
        assert str(caught.value) == (
            f"pyslurm {target.backend.version} has no setting for "  # type: ignore[attr-defined]
            f"#SBATCH --no-such-option of {script} — use --backend slurm"
        )


_NEEDS = "the pyslurm backend needs pyslurm 22.5.x, built for this machine's Slurm 22.05.8; "
_HOW = (
    "(PyPI's pyslurm is for Slurm 25.11 only; for another Slurm build pyslurm's matching "
    "release tag, as chain's scripts/setup --pyslurm does) — use --backend slurm"
)


def _refusal(**kwargs: object) -> str:
    from chain.backends.slurm.pyslurm import PyslurmBackend

    with pytest.raises(BackendUnavailable) as caught:
        PyslurmBackend(**kwargs)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_pyslurm_of_another_slurm_release_is_unavailable() -> None:
    """An importable pyslurm built for another Slurm release is refused, in one line;
    the rule is pyslurm's major.minor == Slurm's (pyslurm writes 22.05 as 22.5)."""
    from chain.backends.slurm.pyslurm import PyslurmBackend

    fake = ModuleType("pyslurm")
    fake.__version__ = "25.11.0"  # type: ignore[attr-defined]
    assert _refusal(module=fake, slurm_version="22.05.8") == (
        f"{_NEEDS}the installed pyslurm 25.11.0 is for Slurm 25.11 {_HOW}"
    )
    matching = PyslurmBackend(module=fake, slurm_version="25.11.3")
    assert (matching.name, matching.version, matching.slurm_version) == ("pyslurm", "25.11.0", "25.11.3")
    fake.__version__ = "22.5.3"  # type: ignore[attr-defined]
    assert PyslurmBackend(module=fake, slurm_version="22.05.8").version == "22.5.3"
    fake.__version__ = "24.11.0"  # type: ignore[attr-defined]
    assert _refusal(module=fake, slurm_version="22.05.8") == (
        f"{_NEEDS}the installed pyslurm 24.11.0 is for Slurm 24.11 {_HOW}"
    )


def test_pyslurm_missing_old_or_without_slurm_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not installed, the old API only (before 22.5), no running Slurm: one line each;
    without a running Slurm pyslurm is not even imported (libslurm would end the process)."""
    from chain.backends.slurm import pyslurm_load

    monkeypatch.setitem(sys.modules, "pyslurm", None)  # not installed
    assert _refusal(slurm_version="22.05.8") == f"{_NEEDS}pyslurm is not installed {_HOW}"
    old = ModuleType("pyslurm")
    old.__version__ = "22.5.0"  # type: ignore[attr-defined]
    old.job = object  # type: ignore[attr-defined]  # the old API's class, no Job
    monkeypatch.setitem(sys.modules, "pyslurm", old)
    assert _refusal(slurm_version="22.05.8") == (
        f"{_NEEDS}the installed pyslurm 22.5.0 predates the API chain uses (no pyslurm.Job; "
        f"pyslurm 22.5 or later has it) {_HOW}"
    )
    monkeypatch.setattr(pyslurm_load, "running_slurm_version", lambda: None)
    assert _refusal() == (
        "the pyslurm backend needs a pyslurm built for the running Slurm's release; not tried: "
        f"the Slurm clients found no configuration (sinfo --version failed) {_HOW}"
    )
