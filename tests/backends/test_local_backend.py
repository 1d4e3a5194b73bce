"""The embedded local backend: real processes, short sleeps, scaled time limits.

Nothing here sleeps a fixed time and then asserts: every wait is for an event
(a job state, a file a job writes), with a generous bound (tests/waiting.py),
so a loaded machine only makes the tests slower, never red."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from waiting import wait_until

from chain.backends.base import JobInfo, JobState
from chain.backends.local.backend import LocalBackend
from chain.backends.local.sbatch import parse_directives
from chain.backends.local.spool import current_user
from chain.errors import SchedulerError
from chain.primitives.procs import Proc

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
SCALE = 0.02  # --time=1 (one minute) becomes 1.2 s
KILL_WAIT = 0.5


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path / "spool", kill_wait=KILL_WAIT, time_scale=SCALE)


def write_script(directory: Path, body: str, *directives: str, name: str = "job.sh") -> Path:
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), textwrap.dedent(body)]
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    return path


def wait_for(backend: LocalBackend, job_id: str, *, finished: bool = True, timeout: float = 30.0) -> JobInfo:
    """Poll until the job has finished (or, with finished=False, is running)."""

    def reached() -> JobInfo | None:
        info = backend.query([job_id]).get(job_id)
        if info is not None and (info.state.finished if finished else info.state is JobState.RUNNING):
            return info
        return None

    return wait_until(
        reached,
        timeout,
        what=f"job {job_id} {'finished' if finished else 'running'}",
        describe=lambda: backend.query([job_id]),
    )


def read_nonempty(path: Path) -> str | None:
    return path.read_text() if path.exists() and path.read_text().strip() else None


def wait_file(path: Path, timeout: float = 30.0) -> str:
    return wait_until(lambda: read_nonempty(path), timeout, what=f"{path} written")


def gone(pid: int, timeout: float = 30.0) -> bool:
    """The process ended (a zombie counts: PID 1 of a container may never reap it)."""
    return wait_until(lambda: (p := Proc.read(pid)) is None or p.zombie, timeout, what=f"process {pid} gone")


def test_completed_with_output_pattern(backend: LocalBackend, tmp_path: Path) -> None:
    script = write_script(tmp_path, "echo hello; echo oops >&2", "--output=out-%j-%x.log")
    job = backend.submit(script, job_name="hi", cwd=tmp_path)
    info = wait_for(backend, job)
    assert info.state is JobState.COMPLETED
    assert (info.exit_code, info.signal, info.name, info.source) == (0, None, "hi", "local")
    assert info.start is not None and info.end is not None and info.end >= info.start
    assert (tmp_path / f"out-{job}-hi.log").read_text() == "hello\noops\n"


def test_default_output_and_separate_error(backend: LocalBackend, tmp_path: Path) -> None:
    plain = backend.submit(write_script(tmp_path, "echo a", name="a.sh"), job_name="a", cwd=tmp_path)
    split = backend.submit(
        write_script(tmp_path, "echo b; echo c >&2", "-e 'err %j.txt'", name="b.sh"), job_name="b", cwd=tmp_path
    )
    wait_for(backend, plain)
    wait_for(backend, split)
    assert (tmp_path / f"slurm-{plain}.out").read_text() == "a\n"
    assert (tmp_path / f"slurm-{split}.out").read_text() == "b\n"
    assert (tmp_path / f"err {split}.txt").read_text() == "c\n"


def test_exit_code_is_failed(backend: LocalBackend, tmp_path: Path) -> None:
    job = backend.submit(write_script(tmp_path, "exit 3"), job_name="x", cwd=tmp_path)
    info = wait_for(backend, job)
    assert (info.state, info.exit_code, info.signal) == (JobState.FAILED, 3, None)


def test_killed_by_signal_records_signal(backend: LocalBackend, tmp_path: Path) -> None:
    job = backend.submit(write_script(tmp_path, "kill -KILL $$"), job_name="x", cwd=tmp_path)
    info = wait_for(backend, job)
    assert (info.state, info.exit_code, info.signal) == (JobState.FAILED, 0, 9)


def test_timeout_sends_term(backend: LocalBackend, tmp_path: Path) -> None:
    body = """
        trap 'echo TERM > got; exit 0' TERM
        sleep 30 & wait $!
    """
    job = backend.submit(write_script(tmp_path, body, "--time=1"), job_name="t", cwd=tmp_path)
    running = wait_for(backend, job, finished=False)
    assert running.start is not None and running.end is not None
    assert running.end - running.start == pytest.approx(60 * SCALE)
    assert backend.end_time(job) == pytest.approx(running.end)
    info = wait_for(backend, job)
    assert (info.state, info.exit_code, info.signal, info.reason) == (JobState.TIMEOUT, 0, None, "TimeLimit")
    assert (tmp_path / "got").read_text() == "TERM\n"
    # it ended by its own exit 0 in the TERM trap (a SIGKILL would show as
    # signal 9), and not before its limit
    assert info.end is not None and info.end - running.start >= 60 * SCALE - 0.01
    assert backend.end_time(job) is None


def test_timeout_ignoring_term_gets_killed(backend: LocalBackend, tmp_path: Path) -> None:
    body = """
        trap 'echo TERM >> got' TERM
        while :; do sleep 0.05; done
    """
    job = backend.submit(write_script(tmp_path, body, "-t 1"), job_name="t", cwd=tmp_path)
    info = wait_for(backend, job)
    assert info.state is JobState.TIMEOUT
    assert "TERM" in (tmp_path / "got").read_text()
    assert info.start is not None and info.end is not None
    assert info.end - info.start >= 60 * SCALE + KILL_WAIT - 0.05


def test_cancel_running(backend: LocalBackend, tmp_path: Path) -> None:
    job = backend.submit(write_script(tmp_path, "sleep 30"), job_name="c", cwd=tmp_path)
    wait_for(backend, job, finished=False)
    started = time.time()
    backend.cancel(job)
    info = wait_for(backend, job)
    assert info.state is JobState.CANCELLED
    assert info.cancelled_by == current_user()
    assert info.signal == signal.SIGTERM  # the batch shell died of the TERM
    assert time.time() - started < 15.0  # the cancel ended it, not its 30 s sleep
    backend.cancel(job)  # ended: a no-op
    assert backend.query([job])[job].state is JobState.CANCELLED


def test_cancel_running_job_ignoring_term(backend: LocalBackend, tmp_path: Path) -> None:
    body = "trap '' TERM\nwhile :; do sleep 0.05; done"
    job = backend.submit(write_script(tmp_path, body), job_name="c", cwd=tmp_path)
    wait_for(backend, job, finished=False)
    backend.cancel(job)
    info = wait_for(backend, job)
    assert (info.state, info.signal) == (JobState.CANCELLED, signal.SIGKILL)


def test_cancel_pending(backend: LocalBackend, tmp_path: Path) -> None:
    first = backend.submit(write_script(tmp_path, "sleep 30"), job_name="p", cwd=tmp_path)
    marker = tmp_path / "ran"
    second = backend.submit(
        write_script(tmp_path, f"touch {marker}", name="2.sh"),
        job_name="q",
        dependency=f"afterany:{first}",
        cwd=tmp_path,
    )
    # a witness with the same dependency, not cancelled: once it has run,
    # the cancelled job would have run too, had the cancel not held
    witness = backend.submit(
        write_script(tmp_path, "true", name="3.sh"), job_name="w", dependency=f"afterany:{first}", cwd=tmp_path
    )
    wait_for(backend, first, finished=False)
    pending = backend.query([second])[second]
    assert (pending.state, pending.reason) == (JobState.PENDING, "Dependency")
    backend.cancel(second)
    info = backend.query([second])[second]  # at once, no waiting
    assert info.state is JobState.CANCELLED and info.start is None
    backend.cancel(first)
    wait_for(backend, first)
    assert wait_for(backend, witness).state is JobState.COMPLETED
    assert not marker.exists()
    assert backend.query([second])[second].start is None


def test_cancel_with_signal_reaches_batch_shell_only(backend: LocalBackend, tmp_path: Path) -> None:
    body = """
        bash -c 'trap "echo child >> got" USR1; trap "echo child-usr2 >> got" USR2; echo $$ > child.pid
                 while :; do sleep 0.05; done' &
        trap 'echo batch >> got' USR1
        until [ -e release ]; do sleep 0.05; done
        echo done >> got
    """
    job = backend.submit(write_script(tmp_path, body), job_name="s", cwd=tmp_path)
    wait_for(backend, job, finished=False)
    child = int(wait_file(tmp_path / "child.pid"))
    backend.cancel(job, signal="USR1")
    # The child's traps run pending signals in number order (USR1 before
    # USR2): once it has answered a USR2 sent after the cancel, a USR1 from
    # the cancel would have shown first.
    os.kill(child, signal.SIGUSR2)
    got = tmp_path / "got"
    wait_until(
        lambda: {"batch", "child-usr2"} <= set(got.read_text().split()) if got.exists() else False,
        what="the batch shell's USR1 trap and the child's USR2 trap",
    )
    (tmp_path / "release").touch()
    info = wait_for(backend, job)
    assert info.state is JobState.COMPLETED
    lines = got.read_text().split()
    assert sorted(lines[:2]) == ["batch", "child-usr2"] and lines[2:] == ["done"], lines
    assert gone(child)  # leftovers die with the batch step


def test_cancel_unknown_and_bad_signal(backend: LocalBackend, tmp_path: Path) -> None:
    with pytest.raises(SchedulerError):
        backend.cancel("4242")
    job = backend.submit(write_script(tmp_path, "sleep 30"), job_name="c", cwd=tmp_path)
    wait_for(backend, job, finished=False)
    with pytest.raises(SchedulerError):
        backend.cancel(job, signal="NOPE")
    backend.cancel(job)


def _stamp_body(tmp_path: Path, tag: str, seconds: float) -> str:
    return f"date +%s.%N > {tmp_path}/{tag}.start\nsleep {seconds}\ndate +%s.%N > {tmp_path}/{tag}.end\n"


def test_singleton_waits_for_earlier_job(backend: LocalBackend, tmp_path: Path) -> None:
    # job a holds until the test releases it (not a fixed sleep): b must wait
    # for it, the other name must not
    release = tmp_path / "release-a"
    hold = (
        f"date +%s.%N > {tmp_path}/a.start\nuntil [ -e {release} ]; do sleep 0.05; done\n"
        f"date +%s.%N > {tmp_path}/a.end\n"
    )
    a = backend.submit(write_script(tmp_path, hold, name="a.sh"), job_name="same", dependency="singleton", cwd=tmp_path)
    b = backend.submit(
        write_script(tmp_path, _stamp_body(tmp_path, "b", 0.1), name="b.sh"),
        job_name="same",
        dependency="singleton",
        cwd=tmp_path,
    )
    other = backend.submit(
        write_script(tmp_path, _stamp_body(tmp_path, "o", 0.1), name="o.sh"),
        job_name="other",
        dependency="singleton",
        cwd=tmp_path,
    )
    wait_for(backend, a, finished=False)
    assert backend.query([b])[b].reason == "Dependency"
    wait_file(tmp_path / "o.start")  # the other name ran while a held
    assert backend.query([b])[b].state is JobState.PENDING
    release.touch()
    for job in (a, b, other):
        assert wait_for(backend, job).state is JobState.COMPLETED
    stamp = {p.name: float(p.read_text()) for p in tmp_path.glob("*.start")}
    stamp.update({p.name: float(p.read_text()) for p in tmp_path.glob("*.end")})
    assert stamp["b.start"] >= stamp["a.end"]
    assert stamp["o.start"] < stamp["a.end"]  # another name does not wait


def test_afterany_waits_even_for_failure(backend: LocalBackend, tmp_path: Path) -> None:
    a = backend.submit(
        write_script(tmp_path, _stamp_body(tmp_path, "a", 0.6) + "exit 1", name="a.sh"), job_name="a", cwd=tmp_path
    )
    b = backend.submit(
        write_script(tmp_path, _stamp_body(tmp_path, "b", 0.1), name="b.sh"),
        job_name="b",
        dependency=f"afterany:{a}",
        cwd=tmp_path,
    )
    never = backend.submit(
        write_script(tmp_path, "true", name="n.sh"), job_name="n", dependency=f"afterok:{a}", cwd=tmp_path
    )
    purged = backend.submit(
        write_script(tmp_path, "true", name="p.sh"), job_name="p", dependency="afterany:987654", cwd=tmp_path
    )
    assert wait_for(backend, a).state is JobState.FAILED
    assert wait_for(backend, b).state is JobState.COMPLETED
    assert wait_for(backend, purged).state is JobState.COMPLETED
    assert float((tmp_path / "b.start").read_text()) >= float((tmp_path / "a.end").read_text())
    wait_until(
        lambda: backend.query([never])[never].reason == "DependencyNeverSatisfied",
        what="afterok on a failed job marked never satisfied",
        describe=lambda: backend.query([never]),
    )
    assert backend.query([never])[never].state is JobState.PENDING
    backend.cancel(never)


def test_afterok_runs_after_success(backend: LocalBackend, tmp_path: Path) -> None:
    a = backend.submit(write_script(tmp_path, "sleep 0.3", name="a.sh"), job_name="a", cwd=tmp_path)
    b = backend.submit(
        write_script(tmp_path, "true", "--dependency=afterok:" + a, name="b.sh"), job_name="b", cwd=tmp_path
    )  # from the script's directive
    assert wait_for(backend, b).state is JobState.COMPLETED
    assert backend.query([a])[a].state is JobState.COMPLETED


def test_find_by_name(backend: LocalBackend, tmp_path: Path) -> None:
    script = write_script(tmp_path, "true", "--job-name=ignored")
    first = backend.submit(script, job_name="chain/run 1", cwd=tmp_path)
    second = backend.submit(script, job_name="chain/run 1", cwd=tmp_path)
    third = backend.submit(script, job_name="other", cwd=tmp_path)
    assert backend.find_by_name("chain/run 1") == [first, second]
    assert backend.find_by_name("other") == [third]
    assert backend.find_by_name("ignored") == []
    assert backend.find_by_name("nothing") == []
    for job in (first, second, third):
        wait_for(backend, job)


def test_job_survives_submitter(tmp_path: Path) -> None:
    script = write_script(tmp_path, f"until [ -e {tmp_path}/go ]; do sleep 0.05; done; echo survived")
    code = textwrap.dedent(f"""
        from pathlib import Path
        from chain.backends.local.backend import LocalBackend
        print(LocalBackend(Path({str(tmp_path / "spool")!r})).submit(
            Path({str(script)!r}), job_name="orphan", cwd=Path({str(tmp_path)!r})))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True, timeout=30)
    job = out.stdout.strip()
    backend = LocalBackend(tmp_path / "spool")
    # The submitter has exited while its job still runs (it holds until released).
    assert backend.query([job])[job].state in (JobState.PENDING, JobState.RUNNING)
    wait_for(backend, job, finished=False)
    (tmp_path / "go").touch()
    assert wait_for(backend, job).state is JobState.COMPLETED
    assert (tmp_path / f"slurm-{job}.out").read_text() == "survived\n"


def test_killed_supervisor_becomes_node_fail(backend: LocalBackend, tmp_path: Path) -> None:
    job = backend.submit(write_script(tmp_path, "echo $$ > batch.pid; sleep 30"), job_name="lost", cwd=tmp_path)
    wait_for(backend, job, finished=False)
    batch = int(wait_file(tmp_path / "batch.pid"))
    record = backend.spool.read(job)
    assert record is not None and record.supervisor_pid is not None
    os.kill(record.supervisor_pid, signal.SIGKILL)
    info = wait_for(backend, job)
    assert (info.state, info.reason) == (JobState.NODE_FAIL, "supervisor lost")
    assert gone(batch)  # no unsupervised job left behind


def test_environment(backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FROM_SUBMITTER", "yes")
    monkeypatch.setenv("SLURM_JOB_ID", "stale")
    body = "env | grep -E '^(SLURM|SLURMD|CHAIN_LOCAL|FROM|EXTRA)' | sort\necho PWD=$(pwd)"
    workdir = tmp_path / "work"
    workdir.mkdir()
    job = backend.submit(write_script(tmp_path, body, "--time=1"), job_name="envjob", env={"EXTRA": "1"}, cwd=workdir)
    assert wait_for(backend, job).state is JobState.COMPLETED
    lines = (workdir / f"slurm-{job}.out").read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines)
    assert env["SLURM_JOB_ID"] == env["SLURM_JOBID"] == job
    assert env["SLURM_JOB_NAME"] == "envjob"
    assert env["SLURM_SUBMIT_DIR"] == env["PWD"] == str(workdir)
    assert env["SLURM_CLUSTER_NAME"] == "local"
    assert env["SLURM_JOB_NUM_NODES"] == env["SLURM_NTASKS"] == "1"
    assert env["SLURMD_NODENAME"] and "." not in env["SLURMD_NODENAME"]
    assert env["CHAIN_LOCAL_SPOOL"] == str(backend.spool.root)
    assert env["FROM_SUBMITTER"] == "yes" and env["EXTRA"] == "1"
    assert int(env["SLURM_JOB_END_TIME"]) - int(env["SLURM_JOB_START_TIME"]) in (1, 2)


def test_unique_ids_under_concurrent_submits(tmp_path: Path) -> None:
    script = write_script(tmp_path, "true")
    code = textwrap.dedent(f"""
        from concurrent.futures import ThreadPoolExecutor
        from pathlib import Path
        from chain.backends.local.backend import LocalBackend
        b = LocalBackend(Path({str(tmp_path / "spool")!r}))
        with ThreadPoolExecutor(3) as pool:
            ids = list(pool.map(lambda i: b.submit(Path({str(script)!r}), job_name=f"j{{i}}",
                                                   cwd=Path({str(tmp_path)!r})), range(5)))
        print(" ".join(ids))
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    ids = [i for p in procs for i in p.communicate(timeout=30)[0].split()]
    assert all(p.returncode == 0 for p in procs)
    assert len(ids) == 20 and len(set(ids)) == 20
    assert sorted(ids, key=int) == [str(i) for i in range(1, 21)]
    backend = LocalBackend(tmp_path / "spool")
    for job in ids:
        assert wait_for(backend, job).state is JobState.COMPLETED


def test_submit_rejects_what_sbatch_rejects(backend: LocalBackend, tmp_path: Path) -> None:
    with pytest.raises(SchedulerError):
        backend.submit(write_script(tmp_path, "true", "--time=soon"), job_name="x")
    with pytest.raises(SchedulerError):
        backend.submit(write_script(tmp_path, "true"), job_name="x", dependency="before:1")
    with pytest.raises(SchedulerError):
        backend.submit(tmp_path / "missing.sh", job_name="x")
    assert backend.query(["1", "../etc", "nope"]) == {}


def test_unlimited_job_has_no_end_time(backend: LocalBackend, tmp_path: Path) -> None:
    job = backend.submit(write_script(tmp_path, "sleep 30"), job_name="u", cwd=tmp_path)
    info = wait_for(backend, job, finished=False)
    assert info.end is None and backend.end_time(job) is None
    backend.cancel(job)
    wait_for(backend, job)


def test_parse_directives() -> None:
    text = textwrap.dedent("""\
        #!/bin/bash -l
        # a comment

        #SBATCH --partition=debug --exclusive
        #SBATCH --time 1-00:00:00   # one day
        #SBATCH -J 'my job'
        #SBATCH -o"out %j.txt"
        #SBATCH --error=err.txt -d singleton
        #SBATCH --mem 4G
        echo start
        #SBATCH --time=5
    """)
    found = parse_directives(text)
    assert found.time == "1-00:00:00"
    assert found.job_name == "my job"
    assert found.output == "out %j.txt"
    assert found.error == "err.txt"
    assert found.dependency == "singleton"


def test_queue_verb(backend: LocalBackend, tmp_path: Path) -> None:
    job = backend.submit(write_script(tmp_path, "true"), job_name="listed", cwd=tmp_path)
    wait_for(backend, job)
    out = subprocess.run(
        [sys.executable, "-m", "chain.backends.local", "queue", "--all", str(backend.spool.root)],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.splitlines()[0].split()[:3] == ["JOBID", "NAME", "STATE"]
    assert out.splitlines()[1].split()[:3] == [job, "listed", "COMPLETED"]
