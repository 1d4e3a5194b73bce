"""The fault suite's view of the chain under test (see driver.py): its
files, the app's own log (fault_app.py), its jobs in the queue, and the
documented commands run on it. chain's own files only tell the driver *when*
to act; proofs and invariants come from the app's log, squeue and the Slurm
call log."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_helpers import chain_cmd
from evidence import LIVE_STATES, FaultError, _alive, job_active, squeue_rows

ENDED = ("completed", "failed", "stopped", "cancelled")


@dataclass
class Chain:
    workdir: Path
    env: dict[str, str]
    max_iter: int
    chain_id: str = ""

    @property
    def dir(self) -> Path:
        return self.workdir / ".chain"

    @property
    def ckpt(self) -> Path:
        return self.workdir / "state_iter.txt"

    @property
    def iter_log(self) -> Path:
        return self.workdir / "iterations.log"

    def cmd(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc: subprocess.CompletedProcess[str] = chain_cmd(
            *args, cwd=self.workdir, env=self.env, timeout=timeout, check=check
        )
        return proc

    def state(self) -> dict[str, Any]:
        for _ in range(20):
            try:
                return dict(json.loads((self.dir / "state.json").read_text()))
            except (OSError, ValueError):
                time.sleep(0.05)
        raise FaultError("state.json unreadable")

    def record(self, job_id: str) -> dict[str, Any]:
        try:
            return dict(json.loads((self.dir / "runners" / f"{job_id}.json").read_text()))
        except (OSError, ValueError):
            return {}

    def runners(self) -> list[dict[str, Any]]:
        try:
            lines = (self.dir / "runners.jsonl").read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def log_text(self) -> str:
        try:
            return (self.dir / "chain.log").read_text()
        except OSError:
            return ""

    def events(self) -> list[list[str]]:
        try:
            return [line.split() for line in self.iter_log.read_text().splitlines() if line.strip()]
        except OSError:
            return []

    def counter_text(self) -> str:
        try:
            return self.ckpt.read_text()
        except OSError:
            return ""

    def counter(self) -> int:
        """The counter as chain reads it: a missing file is 0 (an app
        killed inside its first save leaves none)."""
        text = self.counter_text().strip()
        return int(text) if text else 0

    def committed(self) -> int:
        last = 0
        for ev in self.events():
            if ev[1] == "ckpt":
                last = int(ev[2])
        return last

    def set_pace(self, seconds: float, save_delay: float | None = None) -> None:
        tmp = self.workdir / ".pace.tmp"
        delay = self.env["FAULT_SAVE_DELAY"] if save_delay is None else str(save_delay)
        tmp.write_text(f"{seconds} {delay}\n")
        os.replace(tmp, self.workdir / "pace")

    def wait(self, what: str, pred: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = pred()
            if value:
                return value
            time.sleep(interval)
        raise FaultError(
            f"timed out after {timeout:.0f}s waiting for {what}; state {self.state()}\n"
            + "\n".join(self.log_text().splitlines()[-25:])
        )

    def wait_ended(self, timeout: float) -> dict[str, Any]:
        return dict(self.wait("the chain to end", lambda: (s := self.state())["state"] in ENDED and s, timeout))

    def app_running(self) -> tuple[str, int] | None:
        """(runner job id, app pid) once the current runner's app has logged
        an iteration."""
        st = self.state()
        job = st.get("runner_job_id")
        if st["state"] != "running" or not st.get("runner_live") or not job:
            return None
        pid = None
        evs = self.events()
        for ev in evs:
            if ev[3] == job and ev[1] == "start":
                pid = int(ev[4])
            elif ev[3] == job and ev[1] in ("exit",):
                pid = None
        if pid is None or not any(ev[3] == job and ev[1] == "iter" for ev in evs[-50:]):
            return None
        return (job, pid) if _alive(pid) else None

    def wait_app(self, timeout: float = 120) -> tuple[str, int]:
        job, pid = self.wait("a running app", self.app_running, timeout)
        return str(job), int(pid)

    def app_exit(self, pid: int) -> float | None:
        """When app ``pid`` logged its exit (its own last word), None if it did not."""
        for ev in self.events():
            if ev[1] == "exit" and int(ev[4]) == pid:
                return float(ev[0])
        return None

    def starts_after(self, t: float) -> list[list[str]]:
        return [ev for ev in self.events() if ev[1] == "start" and float(ev[0]) >= t]

    def live_jobs(self) -> list[str]:
        """The chain's jobs in the queue (by their names), pending or running."""
        return [j for j, n, s in squeue_rows() or [] if n.startswith(self.chain_id + ".") and s in LIVE_STATES]

    def quiet(self) -> None:
        """Wait until the chain's last driver has left the queue: it may
        still run the report hook after it marked the chain ended, and resume
        refuses that. Submitter mode: that submitter only (a live runner
        stays, to be adopted); relay: every job of the chain (resume refuses
        a running or queued runner)."""
        sub = self.state().get("submitter_job_id", "")
        if sub:
            self.wait(f"submitter {sub} to leave the queue", lambda: not job_active(sub), 120, interval=0.5)
        else:
            self.wait("the chain's jobs to leave the queue", lambda: not self.live_jobs(), 120, interval=0.5)

    def resume(self, *extra: str) -> str:
        """The documented `chain submit --resume`, once the chain is quiet."""
        self.quiet()
        out = self.cmd("submit", "--resume", *extra)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
