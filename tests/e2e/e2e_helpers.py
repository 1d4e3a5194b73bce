"""Helpers for the end-to-end tests: run `chain`, wait for a chain to end,
check an app's iteration log and a completed chain's invariants. A uniquely
named module (not conftest), so `from e2e_helpers import ...` cannot pick up
another directory's conftest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waiting import wait_until

from chain.backends import make_backend
from chain.store.jsonio import tail_lines

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def chain_cmd(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "chain", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"chain {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def status(cwd: Path, chain_dir: str | None = None) -> dict[str, Any]:
    where = ["--chain-dir", chain_dir] if chain_dir else []
    report: dict[str, Any] = json.loads(chain_cmd("status", "--json", *where, cwd=cwd).stdout)
    return report


def wait_ended(cwd: Path, timeout: float, sample: Any = None, chain_dir: str | None = None) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        report = status(cwd, chain_dir)
        if report["state"] in ("completed", "failed", "stopped", "cancelled"):
            return report
        if sample is not None:
            sample()
        time.sleep(0.5)
    log_file = Path(cwd, chain_dir or ".chain", "chain.log")
    chain_log = log_file.read_text() if log_file.exists() else "(no chain.log)"
    outputs = "".join(
        f"--- {p.name} (last lines)\n" + "\n".join(tail_lines(p, 12)) + "\n"
        for p in sorted(log_file.parent.glob("logs/*.out"))
    )
    raise AssertionError(f"chain did not end in {timeout}s; last status {report}\n{chain_log}\n{outputs}")


def restart_cluster(cluster: Any, *options: str) -> None:
    """Restart the dev cluster with ``options`` (each ``up`` sets all of them:
    none, no preemption and no job limit)."""
    done = subprocess.run(
        ["bash", str(cluster.script), "up", *options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def copy_example(kind: str, dest: Path) -> None:
    for f in (EXAMPLES / kind).iterdir():
        if f.is_file():
            shutil.copy(f, dest / f.name)


@dataclass
class IterLog:
    events: list[tuple[float, str, int, str]]

    @classmethod
    def read(cls, path: Path) -> IterLog:
        events = []
        for line in path.read_text().splitlines():
            f = line.split()
            events.append((float(f[0]), f[1], int(f[2]), f[3]))
        return cls(events)

    def check_exactly_once_beyond_checkpoints(self, max_iter: int) -> int:
        """Every iteration 1..max_iter computed; a resume starts at the last
        committed checkpoint; an iteration computed twice only when it came
        after the last checkpoint before a stop. Returns iterations redone."""
        committed = 0
        done: dict[int, int] = {}
        redone_allowed = 0
        computed_since_ckpt: list[int] = []
        for _, event, value, _job in self.events:
            if event == "start":
                assert value == committed, f"resumed at {value} but the last checkpoint was {committed}"
                redone_allowed += len(computed_since_ckpt)
                computed_since_ckpt = []
            elif event == "iter":
                done[value] = done.get(value, 0) + 1
                computed_since_ckpt.append(value)
            elif event == "ckpt":
                assert value >= committed, f"checkpoint went back from {committed} to {value}"
                committed = value
                computed_since_ckpt = []
        missing = [i for i in range(1, max_iter + 1) if i not in done]
        assert not missing, f"iterations never computed: {missing[:10]}"
        redone = sum(n - 1 for n in done.values())
        assert redone <= redone_allowed, f"{redone} iterations computed twice, only {redone_allowed} were lost"
        return redone

    def starts(self) -> list[str]:
        return [job for _, e, _, job in self.events if e == "start"]


def check_completed_chain(
    report: dict[str, Any], workdir: Path, max_iter: int, *, user_hook: str = "user-hook\n"
) -> str:
    """The invariants of a chain of the python example that ran to completion
    with the seed's hook (``plot_progress.py`` appending ``x``) and a user
    hook (appending ``user_hook`` to ``hooks.ran``): completed at MAX_ITER;
    at least three runners, each but the last handing over (``continue``),
    each starting where the one before ended; every iteration computed once
    beyond checkpoints, one app start a runner; each hook ran exactly once.
    Returns the chain's log."""
    log = (workdir / ".chain" / "chain.log").read_text()
    assert report["state"] == "completed", log
    assert report["iteration"] == report["max_iter"] == max_iter
    runners = report["runners"]
    assert len(runners) >= 3
    assert all(r["exit_code"] in (0, 99, 124) for r in runners)
    assert runners[-1]["verdict"] == "complete" and all(r["verdict"] == "continue" for r in runners[:-1])
    assert [r["iter_before"] for r in runners[1:]] == [r["iter_after"] for r in runners[:-1]]
    # hooks: built-in report, the seed's script, the user's command — each exactly once
    assert (workdir / "plot_progress.ran").read_text() == "x\n"
    assert (workdir / "hooks.ran").read_text() == user_hook
    names = [h["name"] for h in report["hooks"]]
    assert sorted(names) == sorted(set(names)) and "report" in names
    assert log.count("hook report: running") == 1
    iterlog = IterLog.read(workdir / "iterations.log")
    iterlog.check_exactly_once_beyond_checkpoints(max_iter)
    assert len(iterlog.starts()) == len(runners)
    return log


@dataclass(frozen=True)
class Prequeued:
    """A lookahead chain caught with runner 1's app computing, runner 2
    pre-queued behind it and the submitter running (``wait_prequeued``)."""

    sched: Any  # the chain's backend (chain.backends.base.Backend)
    app_log: Path  # the test app's own log: "<t> start|exit <counter> <job>" lines
    first: str
    second: str
    submitter: str

    def app_lines(self) -> list[list[str]]:
        return [line.split() for line in self.app_log.read_text().splitlines()] if self.app_log.exists() else []

    def finished(self, job: str) -> Any:
        """The job's JobInfo once it has finished, else None."""
        info = self.sched.query([job]).get(job)
        return info if info is not None and info.state.finished else None


def wait_prequeued(workdir: Path, backend: str) -> Prequeued:
    """Wait (120 s) until a just-submitted ``--lookahead`` chain in WORKDIR, whose
    app logs to app.log, has runner 1 computing and runner 2 pre-queued."""
    chain_dir = workdir / ".chain"
    sched = make_backend(backend, chain_dir)
    app_log = workdir / "app.log"

    def ready() -> dict[str, Any] | None:
        st = json.loads((chain_dir / "state.json").read_text()) if (chain_dir / "state.json").exists() else {}
        sub = str(st.get("submitter_job_id") or "")
        running = sub and (info := sched.query([sub]).get(sub)) is not None and info.state.value == "RUNNING"
        return st if st.get("next_job_id") and running and app_log.exists() and app_log.read_text() else None

    st = wait_until(
        ready, 120, interval=0.2, what="runner 1's app computing, runner 2 queued", describe=lambda: status(workdir)
    )
    return Prequeued(sched, app_log, str(st["runner_job_id"]), str(st["next_job_id"]), str(st["submitter_job_id"]))


def _queue_workdirs() -> list[tuple[str, str]]:
    """(job id, working directory) of every job in the queue."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%Z"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    return [(job, workdir) for job, _, workdir in (line.partition("|") for line in out.splitlines()) if job]


def cancel_jobs_under(root: Path) -> None:
    """scancel every job still queued or running from a directory under ROOT, and wait them
    out (60 s): a failed test leaves nothing of it in the queue."""
    inside = str(root.resolve())

    def ours() -> list[str]:
        return [job for job, workdir in _queue_workdirs() if workdir == inside or workdir.startswith(inside + "/")]

    left = ours()
    if left:
        subprocess.run(["scancel", *left], capture_output=True, timeout=30, check=False)
        wait_until(lambda: not ours(), 60, interval=1, what=f"jobs {left} gone after scancel", describe=ours)
