"""Fault-injection suite (issue 7, proofs from issue 20): a long chain on the
real dev cluster while a driver injects faults at random (seeded,
reproducible) moments, proves each one landed, then checks invariants.

Faults: SIGKILL of the app inside chain.app's atomic save, user scancel of
the runner, scancel / SIGKILL of the submitter, slurmctld stopped, slurmdbd
stopped while a runner is judged, the node set DOWN and back, the counter
file replaced by garbage.

Every proof and invariant comes from evidence chain does not write itself:
the app's own log (``iterations.log``, see fault_app.py), the counter file,
marker files the hooks write, squeue samples and ``scontrol``, and a log of
every Slurm client call chain makes (a shim in front of ``sbatch``,
``squeue``, ``sacct``, ``scontrol`` and ``scancel`` on the chain's ``PATH``,
which records each call's time, exit code and calling job). chain's own
files (``state.json``, ``chain.log``, runner records) only tell the driver
*when* to act. A fault whose effect could not be shown (a timing miss) is
tried again, at most ``ATTEMPTS`` times; a fault not injected, not proven or
skipped fails the run.

    python3 tests/faults/driver.py [--seed N] [--long] [--only NAME]   (or: bash scripts/fault-suite)

The cluster is always restored (``scripts/dev-cluster up``, node resumed),
the chain's leftover jobs cancelled, and /tmp/FAULT_SUITE_RUNNING exists
while the suite runs (others' Slurm tests fail while daemons are stopped).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RUNNING_MARKER = Path("/tmp/FAULT_SUITE_RUNNING")
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from e2e_helpers import IterLog, chain_cmd
from evidence import (
    LIVE_STATES,
    Call,
    FaultError,
    NotProven,
    Sampler,
    SlurmCalls,
    _alive,
    _app_overlap,
    _settled,
    cancel_leftovers,
    cluster_env,
    cluster_up,
    daemon_pid,
    job_active,
    job_restarts,
    node_name,
    node_state,
    sh,
    squeue_rows,
)
from schedule import Report, Step, execute, proven_check

from chain.app.atomic import TMP_PREFIX

ENDED = ("completed", "failed", "stopped", "cancelled")
HOOK_MARKERS = ("aggregate_usage.ran", "plot_progress.ran", "user-hook.ran")


# --------------------------------------------------------------------------- the chain
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
        proc: subprocess.CompletedProcess[str] = chain_cmd(*args, cwd=self.workdir, env=self.env,
                                                           timeout=timeout, check=check)
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
        return int(self.ckpt.read_text().strip())

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
        raise FaultError(f"timed out after {timeout:.0f}s waiting for {what}; state {self.state()}\n"
                         + "\n".join(self.log_text().splitlines()[-25:]))

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

    def resume(self, *extra: str) -> str:
        """The documented `chain submit --resume`, once the chain's last
        submitter has left the queue (it may still be running the report
        hook after it marked the chain ended: resume refuses that)."""
        sub = self.state().get("submitter_job_id", "")
        if sub:
            self.wait(f"submitter {sub} to leave the queue", lambda: not job_active(sub), 120, interval=0.5)
        out = self.cmd("submit", "--resume", *extra)
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


# --------------------------------------------------------------------------- faults
class Suite:
    def __init__(self, seed: int, scale: str, workdir: Path, only: tuple[str, ...] = ()) -> None:
        self.only = only
        self.rng = random.Random(seed)
        self.report = Report(seed, scale)
        self.long = scale == "long"
        self.node = node_name()
        # development knobs (to show that a weakened setting fails the suite):
        # FAULT_SUITE_MAX_ITER, FAULT_SUITE_SAVE_DELAY, FAULT_SUITE_CHAIN_ARGS
        # (more `chain submit` arguments)
        self.max_iter = int(os.environ.get("FAULT_SUITE_MAX_ITER", "3000" if self.long else "1500"))
        self.calls = SlurmCalls(workdir)
        self.chain = Chain(workdir, {
            "ITER_SECONDS": "0.1", "FAULT_SAVE_DELAY": os.environ.get("FAULT_SUITE_SAVE_DELAY", "0.4"),
            "FAULT_PACE_FILE": str(workdir / "pace"),
        }, self.max_iter)
        self.sampler: Sampler | None = None
        self.pace = 0.25  # seconds per iteration while faults are injected
        self.cluster_disturbed = False

    # -- helpers
    def delay(self, lo: float, hi: float) -> float:
        return round(self.rng.uniform(lo, hi), 2)

    @property
    def s(self) -> Sampler:
        assert self.sampler is not None
        return self.sampler

    def wait_quiet_cluster(self, limit: float = 1200) -> None:
        """Disruptive faults only when no other jobs are on the cluster (the
        chain is slowed down meanwhile, so it does not finish first)."""
        start = time.time()
        slowed = False
        try:
            self._wait_quiet(start, limit, lambda: None if slowed else self.chain.set_pace(1.0))
            slowed = True
        finally:
            self.chain.set_pace(self.pace)

    def _wait_quiet(self, start: float, limit: float, slow: Callable[[], None]) -> None:
        announced = False
        while True:
            rows = squeue_rows() or []
            others = sorted({n for _, n, s in rows if not n.startswith(self.chain.chain_id + ".")
                             and s in LIVE_STATES})
            if not others:
                return
            if time.time() - start > limit:
                self.report.note(f"cluster still busy after {limit:.0f}s ({others[:3]}); going ahead")
                return
            if not announced:
                announced = True
                slow()
                self.report.note(f"waiting for other jobs to leave the cluster before a disruptive fault: "
                                 f"{others[:3]}")
            time.sleep(5)

    def progress_after(self, counter: int, timeout: float) -> int:
        """Wait until the committed checkpoint (the app's log) passes
        ``counter`` (the chain goes on); returns the new value."""
        return int(self.chain.wait(f"a checkpoint beyond {counter}",
                                   lambda: (c := self.chain.committed()) > counter and c, timeout))

    def chain_calls(self, since: float, until: float = float("inf")) -> list[Call]:
        return [c for c in self.calls.calls() if c.start >= since and c.start <= until]

    # -- 1: SIGKILL of the app inside chain.app's atomic save
    def kill_app(self, retries: bool) -> None:
        ch = self.chain
        job, _ = ch.wait_app()
        time.sleep(self.delay(0.5, 4))
        seen = len(ch.events())

        def inside() -> tuple[int, int] | None:
            for ev in ch.events()[seen:]:
                if ev[1] == "inside" and ev[3] == job:
                    return int(ev[4]), int(ev[2])
            return None

        pid, value = ch.wait("the app inside chain.app's atomic write", inside, 60, interval=0.01)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        ch.wait(f"app {pid} to die", lambda: not _alive(pid), 30, interval=0.05)
        before = ch.committed()
        # what chain.app left published when the app died: the last committed
        # value if the kill landed in the save, the new one if it came after
        # the rename (a miss: tried again)
        at_kill = int(ch.counter_text().strip())
        proof, landed = self.mid_save_proof(pid, value, before)
        injected = f"SIGKILL app pid {pid} of runner {job} inside chain.app's save of counter {value}"
        name = "app-sigkill-retries" if retries else "app-sigkill"
        if not retries:
            st = ch.wait_ended(90)
            counter = ch.counter()
            ok = st["state"] == "failed" and ("137" in st["reason"] or "SIGKILL" in st["reason"]) \
                and counter == at_kill
            effect = f"chain {st['state']}: {st['reason']!r}; counter intact at {counter}"
            if ok and not landed:
                ch.resume()  # the kill missed the save; the chain failed all the same: again
        else:
            def judged() -> dict[str, Any] | None:
                return next((r for r in ch.runners() if r.get("job_id") == job), None)

            entry = ch.wait("the killed runner judged", judged, 90)
            nxt = self.progress_after(at_kill, 120)
            restarts = ch.starts_after(killed_at)
            first = restarts[0] if restarts else None
            ok = entry["verdict"] == "continue" and "retry" in entry["reason"] and first is not None \
                and first[3] != job and int(first[2]) == at_kill
            effect = (f"runner judged {entry['verdict']}: {entry['reason']!r}; next app (job "
                      f"{first[3] if first else '-'}) started at {first[2] if first else '-'}; "
                      f"next checkpoint {nxt} (resumed from {at_kill})")
        if not ok:
            self.report.fault(name, injected, effect, False, proof)
            raise FaultError(effect)
        if not landed:
            raise NotProven(proof)
        self.report.fault(name, injected, effect, ok, proof, killed_at=killed_at)

    def mid_save_proof(self, pid: int, value: int, before: int) -> tuple[str, bool]:
        """The app's log shows it inside chain.app's write and never out of
        it; chain.app's temporary holds the new value; the counter the old."""
        ch = self.chain
        mine = [ev for ev in ch.events() if int(ev[4]) == pid]
        last_inside = max((i for i, ev in enumerate(mine) if ev[1] == "inside" and int(ev[2]) == value),
                          default=None)
        after = [ev[1] for ev in mine[last_inside + 1:]] if last_inside is not None else ["?"]
        tmp = ch.workdir / f"{TMP_PREFIX}{ch.ckpt.name}.{pid}"
        try:
            tmp_text = tmp.read_text()
        except OSError:
            tmp_text = None
        counter = ch.counter_text().strip()
        landed = last_inside is not None and not after and tmp_text == f"{value}\n" and counter == str(before)
        proof = (f"app log of pid {pid}: 'inside {value}' then {after or 'nothing'}; chain.app's temporary "
                 f"{tmp.name}: {tmp_text!r}; counter file {counter!r} (last committed {before})")
        return proof, landed

    # -- 7: garbage checkpoint (on a stopped chain, then resumed)
    def garbage_counter(self) -> None:
        ch = self.chain
        real = ch.ckpt.read_text()
        t = time.time()
        ch.ckpt.write_text("v2 iter 10\n")
        ch.resume()
        st = ch.wait_ended(90)
        started = ch.starts_after(t)
        submitted = [c for c in self.chain_calls(t) if c.submits_runner(ch.chain_id)]
        ok = (st["state"] in ("stopped", "failed") and "plain integer" in st["reason"] and not started
              and not submitted and ch.ckpt.read_text() == "v2 iter 10\n")
        effect = (f"chain {st['state']}: {st['reason']!r}; app started {len(started)} times; "
                  f"counter file left as is")
        proof = (f"no runner sbatch'ed after the garbage was written ({len(submitted)} runner sbatch calls); "
                 f"no app start in the app's log")
        ch.ckpt.write_text(real)
        self.report.fault("garbage-counter", "counter replaced by 'v2 iter 10', chain submit --resume", effect, ok,
                          proof)
        if not ok:
            raise FaultError(effect)

    # -- 2: user scancel of the runner
    def scancel_runner(self) -> None:
        ch = self.chain
        job, pid = ch.wait_app()
        time.sleep(self.delay(0.5, 6))
        t = time.time()
        sh(["scancel", job], check=True)
        st = ch.wait_ended(90)
        ok = st["state"] == "cancelled" and st["reason"] == "runner cancelled by user"
        ch.wait(f"runner {job} to leave the queue", lambda: not job_active(job), 60, interval=0.5)
        slurm = self.s.states(job, t)
        app_exit = ch.app_exit(pid)
        landed = "CANCELLED" in slurm and app_exit is not None and app_exit >= t
        before = ch.committed()
        resumed = ch.resume()
        nxt = self.progress_after(before, 120)
        effect = f"chain {st['state']}: {st['reason']!r}; resumed ({resumed}); next checkpoint {nxt}"
        proof = (f"squeue showed runner {job} {' -> '.join(slurm) or '(nothing)'}; its app (pid {pid}) "
                 f"logged its exit {app_exit - t if app_exit else float('nan'):.1f}s after the scancel")
        if not ok:
            self.report.fault("scancel-runner", f"scancel {job}", effect, False, proof)
            raise FaultError(effect)
        if not landed:
            raise NotProven(proof)
        self.report.fault("scancel-runner", f"scancel {job}", effect, ok, proof)

    # -- 3: scancel / SIGKILL of the submitter, then the documented resume
    def kill_submitter(self, how: str) -> None:
        ch = self.chain
        runner, app_pid = ch.wait_app()
        time.sleep(self.delay(0.3, 3))
        sub = ch.state()["submitter_job_id"]
        argv = ["scancel", sub] if how == "scancel" else ["scancel", "--signal=KILL", "--batch", sub]
        sh(argv, check=True)
        ch.wait(f"submitter {sub} to leave the queue", lambda: not job_active(sub), 60, interval=0.5)
        killed_sub = self.s.states(sub)
        before = ch.committed()
        t_resume = time.time()
        resumed = ch.resume()
        new_subs = ch.wait("a new submitter job in squeue",
                           lambda: [j for j in self.s.jobs_named("s", t_resume) if j != sub], 60)
        new = new_subs[0]
        nxt = self.progress_after(before, 120)
        app_exit = ch.wait(f"runner {runner}'s app (pid {app_pid}) to exit", lambda: ch.app_exit(app_pid), 120)
        # Evidence (squeue samples, the Slurm call log, the app's log):
        together = self.s.together(new, {"RUNNING"}, runner, {"RUNNING"})
        calls = self.chain_calls(t_resume)
        looked = [c for c in calls if c.job == new and c.names(runner)]
        early = [c for c in calls if c.submits_runner(ch.chain_id) and c.start < app_exit]
        app_iters_after = [ev for ev in ch.events() if int(ev[4]) == app_pid and ev[1] == "iter"
                           and together is not None and float(ev[0]) > together]
        ok = not early and bool(looked)
        effect = (f"submitter {sub} {'/'.join(killed_sub)}; resumed ({resumed}): new submitter {new}; "
                  f"next checkpoint {nxt}")
        proof = (f"squeue: new submitter {new} RUNNING beside live runner {runner} "
                 + (f"at +{together - t_resume:.1f}s" if together else "never (runner ended first)")
                 + f"; {new} asked Slurm about {runner} {len(looked)} times"
                 + (f" (first: {looked[0].prog} at +{looked[0].start - t_resume:.1f}s)" if looked else ""))
        proof += (f"; runner sbatch calls before the adopted runner's app exited (+{app_exit - t_resume:.1f}s): "
                  f"{len(early)}; the adopted app logged {len(app_iters_after)} iterations after that")
        name = f"submitter-{how}"
        if not ok:
            self.report.fault(name, " ".join(argv) + f" (runner {runner} running)", effect, False, proof)
            raise FaultError(f"the new submitter did not adopt the live runner: {proof}")
        if together is None or not app_iters_after:
            raise NotProven(proof)
        self.report.fault(name, " ".join(argv) + f" (runner {runner} running)", effect, ok, proof)

    # -- 4: slurmctld stopped for longer than MessageTimeout
    def stop_slurmctld(self, hold: float) -> None:
        ch = self.chain
        ch.wait_app()
        self.wait_quiet_cluster()
        ch.wait_app()
        time.sleep(self.delay(0.5, 5))
        pid = daemon_pid("slurmctld")
        if pid is None:
            raise FaultError("slurmctld is not running")
        before = ch.committed()
        self.cluster_disturbed = True
        os.kill(pid, signal.SIGTERM)
        stopped = time.time()
        ch.wait("slurmctld to exit", lambda: not _alive(pid), 60)

        def refused_so_far() -> list[Call]:
            return [c for c in self.chain_calls(stopped) if c.job != "-" and c.rc != 0]

        # hold at least `hold`; longer (at most 60 s more) until a request of
        # the chain's jobs has come back refused (a client retries for a
        # while before it gives up: a short outage may never be noticed)
        while time.time() < stopped + hold or (time.time() < stopped + hold + 60 and not refused_so_far()):
            time.sleep(0.5)
        restarting = time.time()
        up = cluster_up()
        self.cluster_disturbed = False
        if up.returncode != 0:
            raise FaultError(f"dev-cluster up failed: {up.stderr[-500:]}")
        held = restarting - stopped
        st = ch.state()
        nxt = self.progress_after(before, 180)
        refused = [c for c in self.chain_calls(stopped, restarting) if c.job != "-" and c.rc != 0]
        ok = st["state"] == "running"
        effect = f"held {held:.0f}s; chain stayed {st['state']}; next checkpoint {nxt}"
        proof = (f"{len(refused)} Slurm calls of the chain's jobs refused while slurmctld was down"
                 + (f", e.g. job {refused[0].job}: {refused[0].prog} rc {refused[0].rc}: {refused[0].err[:100]!r}"
                    if refused else ""))
        if not ok:
            self.report.fault("slurmctld-down", f"SIGTERM slurmctld (pid {pid})", effect, False, proof)
            raise FaultError(effect)
        if not refused:
            raise NotProven(proof)
        self.report.fault("slurmctld-down", f"SIGTERM slurmctld (pid {pid}), restarted by dev-cluster up",
                          effect, ok, proof)

    # -- 5: slurmdbd stopped while a runner is judged
    def stop_slurmdbd(self, hold: float) -> None:
        ch = self.chain
        ch.wait_app()
        self.wait_quiet_cluster()
        runner, app_pid = ch.wait_app()
        # aim: down a few seconds before this runner stops its app, so the
        # submitter judges it without accounting
        stop_at = float(ch.record(runner).get("stop_at") or (time.time() + 5))
        wait = stop_at - time.time() - self.delay(2, 5)
        if wait > 0:
            time.sleep(wait)
        pid = daemon_pid("slurmdbd")
        if pid is None:
            raise FaultError("slurmdbd is not running")
        before = ch.committed()
        self.cluster_disturbed = True
        os.kill(pid, signal.SIGTERM)
        stopped = time.time()
        ch.wait("slurmdbd to exit", lambda: not _alive(pid), 60)

        def judged_without_accounting() -> list[Call]:
            return [c for c in self.chain_calls(stopped) if c.prog == "sacct" and c.job != "-"
                    and c.names(runner) and c.rc != 0]

        # hold at least `hold`; longer (up to 90 s) until the next app has started
        while time.time() < stopped + hold or (time.time() < stopped + 90 and not ch.starts_after(stopped)):
            time.sleep(0.5)
        restarting = time.time()
        up = cluster_up()
        self.cluster_disturbed = False
        if up.returncode != 0:
            raise FaultError(f"dev-cluster up failed: {up.stderr[-500:]}")
        st = ch.state()
        nxt = self.progress_after(before, 180)
        failed_sacct = [c for c in judged_without_accounting() if c.start < restarting]
        app_exit = ch.app_exit(app_pid)
        nxt_start = ch.starts_after(stopped)
        next_in_window = [ev for ev in nxt_start if float(ev[0]) < restarting and ev[3] != runner]
        ok = st["state"] == "running" and bool(nxt_start) and int(nxt_start[0][2]) >= before
        effect = (f"held {restarting - stopped:.0f}s; chain stayed {st['state']}; next app (job "
                  f"{nxt_start[0][3] if nxt_start else '-'}) started at {nxt_start[0][2] if nxt_start else '-'}; "
                  f"next checkpoint {nxt}")
        proof = (f"runner {runner}'s app exited "
                 + (f"+{app_exit - stopped:.1f}s into the outage" if app_exit else "(no exit logged)")
                 + f"; the submitter's sacct about {runner} refused {len(failed_sacct)} times while slurmdbd "
                 f"was down; next runner's app started inside the outage: {bool(next_in_window)}")
        if not ok:
            self.report.fault("slurmdbd-down", f"SIGTERM slurmdbd (pid {pid})", effect, False, proof)
            raise FaultError(effect)
        if not failed_sacct or not next_in_window:
            raise NotProven(proof)
        self.report.fault("slurmdbd-down", f"SIGTERM slurmdbd (pid {pid}) while runner {runner} ended, "
                          "restarted by dev-cluster up", effect, ok, proof)

    # -- 6: node DOWN and back: jobs requeued, the chain goes on by itself
    def node_down(self, hold: float) -> None:
        ch = self.chain
        ch.wait_app()
        self.wait_quiet_cluster()
        runner, _ = ch.wait_app()
        time.sleep(self.delay(0.5, 5))
        sub = ch.state()["submitter_job_id"]
        before_states = {j: (self.s.states(j) or ["?"])[-1] for j in (runner, sub)}
        starts = len([ev for ev in ch.events() if ev[1] == "start"])
        self.cluster_disturbed = True
        t = time.time()
        sh(["scontrol", "update", f"nodename={self.node}", "state=down", "reason=fault-suite"], check=True)
        time.sleep(hold)
        back = sh(["scontrol", "update", f"nodename={self.node}", "state=resume"])
        if back.returncode != 0 and node_state(self.node).startswith("down"):
            raise FaultError(f"cannot resume node {self.node}: {back.stderr.strip()}")
        self.cluster_disturbed = False
        # No resume by the driver: requeued jobs must carry the chain on.
        deadline = time.time() + 400
        nxt = None
        while time.time() < deadline:
            # progress: an app started after the fault checkpointing beyond
            # its start (the killed app's own exit save does not count)
            evs = ch.events()
            new_starts = [i for i, ev in enumerate(evs) if ev[1] == "start"][starts:]
            if new_starts:
                later = [int(ev[2]) for ev in evs[new_starts[0]:] if ev[1] == "ckpt"]
                if later and later[-1] > int(evs[new_starts[0]][2]):
                    nxt = later[-1]
                    break
            if ch.state()["state"] in ENDED:
                break
            time.sleep(1)
        st = ch.state()
        after = {j: self.s.states(j, t) for j in (runner, sub)}
        restarts = {j: job_restarts(j) for j in (runner, sub)}
        requeued = {j: "PENDING" in after[j] or "REQUEUED" in after[j] or (restarts[j] or 0) > 0
                    for j in (runner, sub)}
        ok = nxt is not None and st["state"] == "running"
        effect = (f"chain {st['state']} {st['reason']!r}, not resumed by the driver; first checkpoint of an app "
                  f"started after it: {nxt}")
        proof = "; ".join(f"{kind} {j}: {before_states[j]} -> {' -> '.join(after[j]) or '(not seen)'}, "
                          f"Restarts={restarts[j]}" for kind, j in (("runner", runner), ("submitter", sub)))
        injected = (f"scontrol update nodename={self.node} state=down for {hold:.0f}s (runner {runner}, "
                    f"submitter {sub})")
        if not ok:
            self.report.fault("node-down", injected, effect, False, proof)
            raise FaultError(f"{effect}; {proof}")
        if not all(requeued.values()):
            self.report.fault("node-down", injected, effect, False, proof)
            raise FaultError(f"jobs were not requeued: {proof}")
        self.report.fault("node-down", injected, effect, ok, proof)

    # -- the run
    def plan(self) -> list[Step]:
        rounds = 2 if self.long else 1
        steps: list[Step] = []
        for r in range(rounds):
            mixed = [
                Step("app-sigkill(retries)", "app-sigkill-retries", lambda: self.kill_app(True)),
                Step("scancel-runner", "scancel-runner", self.scancel_runner),
                Step("submitter-scancel", "submitter-scancel", lambda: self.kill_submitter("scancel")),
                Step("submitter-sigkill", "submitter-kill", lambda: self.kill_submitter("kill")),
            ]
            hold_ctld, hold_dbd, hold_node = self.delay(22, 30), self.delay(15, 25), self.delay(4, 10)
            mixed += [
                Step(f"slurmctld-down({hold_ctld:.0f}s)", "slurmctld-down",
                     functools.partial(self.stop_slurmctld, hold_ctld)),
                Step(f"slurmdbd-down({hold_dbd:.0f}s)", "slurmdbd-down",
                     functools.partial(self.stop_slurmdbd, hold_dbd)),
                Step(f"node-down({hold_node:.0f}s)", "node-down", functools.partial(self.node_down, hold_node)),
            ]
            self.rng.shuffle(mixed)
            if r == 0:
                mixed = [Step("app-sigkill(no retries)", "app-sigkill", lambda: self.kill_app(False)),
                         Step("garbage-counter", "garbage-counter", self.garbage_counter),
                         Step("resume --retries 3", "", lambda: self.note_resume("--retries", "3"))] + mixed
            steps += mixed
        if self.only:  # development: a subset (the seeded moments stay the same)
            # the first three go together: the garbage counter needs the chain
            # the no-retries kill failed, the resume after it sets --retries
            first = {"app-sigkill(no retries)", "garbage-counter", "resume --retries 3"}
            group = any(s.label.startswith(self.only) for s in steps if s.label in first)
            steps = [s for s in steps if s.label.startswith(self.only) or (group and s.label in first)]
        return steps

    def note_resume(self, *args: str) -> None:
        out = self.chain.resume(*args)
        self.report.note(f"chain submit --resume {' '.join(args)}: {out}")

    def setup_hooks(self) -> list[str]:
        """The seed's two scripts and a user hook, each appending one line
        (state, the app's counter, time) to its own marker file."""
        w = self.chain.workdir
        for script, marker in (("aggregate_usage.py", HOOK_MARKERS[0]), ("plot_progress.py", HOOK_MARKERS[1])):
            (w / script).write_text(
                "import os, time\n"
                f"with open({marker!r}, 'a') as fh:\n"
                "    fh.write(f\"{time.time():.3f} {os.environ.get('CHAIN_STATE', '-')} "
                "{open('state_iter.txt').read().strip()}\\n\")\n")
        return ["--hook", f'echo "$(date +%s.%N) $CHAIN_STATE $(cat state_iter.txt)" >> {HOOK_MARKERS[2]}']

    def run(self) -> Report:
        ch = self.chain
        shutil.copy(HERE / "fault_app.py", ch.workdir / "app.py")
        ch.env.update(self.calls.install())
        ch.set_pace(self.pace)
        hooks = self.setup_hooks()
        args = ["--backend", "slurm", "--max-iter", str(self.max_iter), "--app-cmd", "python3 app.py",
                "--checkpoint-every", "10", "--runner-time", "0:20", "--runner-margin", "6",
                "--submitter-time", "2:00", "--submitter-margin", "20", "--poll-max", "10", *hooks,
                *shlex.split(os.environ.get("FAULT_SUITE_CHAIN_ARGS", ""))]
        self.report.settings = {"MAX_ITER": self.max_iter, "chain": " ".join(args[2:]), "pace": self.pace,
                                "ITER_SECONDS": ch.env["ITER_SECONDS"], "FAULT_SAVE_DELAY": ch.env["FAULT_SAVE_DELAY"],
                                "workdir": str(ch.workdir)}
        steps = self.plan()
        self.report.schedule = [s.label for s in steps]
        if any(s.fault.startswith(("slurm", "node")) for s in steps):
            start = time.time()
            self._wait_quiet(start, 1200, lambda: None)
        out = ch.cmd("submit", *args)
        ch.chain_id = out.stdout.split()[1].rstrip(":")
        self.report.note(f"submitted chain {ch.chain_id}")
        self.sampler = Sampler(ch.chain_id)
        self.sampler.start()
        st: dict[str, Any] = {}
        try:
            execute(steps, self.report, lambda: ch.committed() > self.max_iter * 0.8)
            ch.set_pace(0.01, 0.0)  # the faults are done: finish quickly
            st = self.wait_final()
            time.sleep(1)
        finally:
            self.sampler.stop()
            self.restore()
        proven_check(steps, self.report)
        self.invariants(st)
        self.report.duration = time.time() - self.report.t0
        return self.report

    def wait_final(self) -> dict[str, Any]:
        """The chain's end; after a failed fault that left nothing to drive
        the chain (no job of it queued), its state as it is (the invariants
        then fail), not a wait for an end that cannot come."""
        ch = self.chain
        if any(not f["ok"] for f in self.report.faults) and ch.state()["state"] not in ENDED:
            time.sleep(15)
            queued = [n for _, n, s in squeue_rows() or [] if n.startswith(ch.chain_id + ".") and s in LIVE_STATES]
            if not queued:
                self.report.note("after the failed fault no job of the chain is queued (nothing drives it): "
                                 "not waiting for its end")
                return ch.state()
        try:
            return ch.wait_ended(900 if self.long else 600)
        except FaultError as exc:
            self.report.note(f"the chain did not end: {str(exc)[:300]}")
            return ch.state()

    def restore(self) -> None:
        """Whatever happened, leave the cluster UP and the node IDLE, and no
        job of the chain behind."""
        self.cluster_disturbed = False
        sh(["scontrol", "update", f"nodename={self.node}", "state=resume"], timeout=20)
        up = cluster_up()
        state = node_state(self.node)
        if up.returncode != 0 or state.split("*")[0] not in ("idle", "mixed", "allocated", "completing"):
            self.report.check("cluster restored", False, f"dev-cluster up rc {up.returncode}, node {state!r}")
        else:
            self.report.check("cluster restored", True, f"all daemons up, node {state}")
        cancel_leftovers(self.chain.chain_id)

    # -- invariants: from the app's log, the counter file, hook markers, squeue and the Slurm call log
    def invariants(self, st: dict[str, Any]) -> None:
        ch, rep = self.chain, self.report
        status = json.loads(ch.cmd("status", "--json").stdout)
        rep.check("chain status --json completed", status["state"] == "completed",
                  f"{status['state']} ({status['reason']})")
        counter = ch.counter()
        rep.check("final counter = MAX_ITER", counter == self.max_iter, f"counter {counter}, MAX_ITER {self.max_iter}")
        final_exit = [ev for ev in ch.events() if ev[1] == "exit"][-1:]
        rep.check("the last app exited 0 at MAX_ITER (app log)",
                  bool(final_exit) and final_exit[0][2] == str(self.max_iter) and final_exit[0][5:] == ["0"],
                  f"last exit event {final_exit}")
        try:
            redone = IterLog(_settled(ch.events())).check_exactly_once_beyond_checkpoints(self.max_iter)
            rep.check("iterations exactly once beyond checkpoints", True,
                      f"all {self.max_iter} computed; {redone} redone after faults (all after the last checkpoint)")
        except AssertionError as exc:
            rep.check("iterations exactly once beyond checkpoints", False, str(exc)[:300])
        overlap = _app_overlap(ch.events())
        rep.check("never two apps at once (iteration log)", not overlap, overlap or "app lifetimes disjoint")
        s = self.s
        rep.check("never two runners / submitters in squeue", not s.violations and s.samples > 50,
                  f"{s.samples} samples ({s.failed} while squeue did not answer); "
                  + (f"violations: {s.violations[:5]}" if s.violations else "none"))
        done_at = float(final_exit[0][0]) if final_exit else float("inf")
        for marker in HOOK_MARKERS:
            try:
                lines = (ch.workdir / marker).read_text().splitlines()
            except OSError:
                lines = []
            fields = [line.split() for line in lines]
            rep.check(f"hook marker {marker}: one line, at completion",
                      len(fields) == 1 and fields[0][1:] == ["completed", str(self.max_iter)]
                      and float(fields[0][0]) >= done_at,
                      f"{lines} (the last app exited at {done_at:.3f})")
        # The report hook: its one batched accounting query (sacct without -X)
        # made by the final submitter job after the last app exited.
        usage = [c for c in self.chain_calls(done_at) if c.prog == "sacct" and "-X" not in c.args.split()
                 and c.job != "-"]
        rep.check("the report hook ran once after the final completion (Slurm call log)",
                  len([c for c in usage if c.rc == 0]) == 1,
                  f"{len(usage)} usage sacct calls after the last app exit "
                  f"({[(c.job, c.rc) for c in usage]})")


def run_suite(seed: int, scale: str = "bounded", workdir: Path | None = None,
              only: tuple[str, ...] = ()) -> Report:
    RUNNING_MARKER.write_text(f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')} seed {seed}\n")
    try:
        cluster_env()
        up = cluster_up()
        if up.returncode != 0:
            raise FaultError(f"dev-cluster up failed: {up.stderr[-800:]}")
        base = workdir or Path(tempfile.mkdtemp(prefix="chain-faults-"))
        base.mkdir(parents=True, exist_ok=True)
        suite = Suite(seed, scale, base, only)
        try:
            return suite.run()
        finally:
            if suite.cluster_disturbed:
                suite.restore()
    finally:
        RUNNING_MARKER.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--long", action="store_true", help="a longer chain, every fault twice")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--only", action="append", default=[], help="run only faults starting with this")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    print(f"fault suite: seed {seed} ({'long' if args.long else 'bounded'})", flush=True)
    report = run_suite(seed, "long" if args.long else "bounded", args.workdir, tuple(args.only))
    print()
    print(report.text())
    if args.json:
        args.json.write_text(json.dumps(report.__dict__, indent=1, default=str))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
