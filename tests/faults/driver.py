"""Fault-injection suite (issue 7, proofs from issue 20): a long chain on the
real dev cluster while a driver injects faults at random (seeded,
reproducible) moments, proves each one landed, then checks invariants.

Faults: SIGKILL of the app inside chain.app's atomic save, user scancel of
the runner, scancel / SIGKILL of the submitter, slurmctld stopped, slurmdbd
stopped while a runner is judged, the node set DOWN and back, the counter
file replaced by garbage, SIGKILL of the runner's supervising process (the
``chain _runner`` the batch script execs) while its app runs, and racing
commands (``chain cancel`` and ``chain submit --resume`` at the same instant
on a live chain, then two ``--resume`` at once on the cancelled one).

Both modes (``--mode submitter|relay``). Relay has no submitter job: the
submitter faults and slurmdbd-down (aimed at the submitter's accounting query)
are not scheduled; slurmctld is stopped under the running runner's ``sbatch``
of its successor instead. The driver is Slurm-only by nature (daemons, node
state, scancel): the local backend's relay is covered by tests/e2e.

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

    python3 tests/faults/driver.py [--seed N] [--long] [--mode relay] [--only NAME]   (or: bash scripts/fault-suite)

The cluster is always restored (``scripts/dev-cluster up``, node resumed),
the chain's leftover jobs cancelled, and /tmp/FAULT_SUITE_RUNNING exists
while the suite runs (others' Slurm tests fail while daemons are stopped;
``.port<N>`` appended for a scripts/in-debian root's cluster, see
``evidence.running_marker``). Processes are only ever signalled by pid files
of this cluster's daemons or pids from the app's log and /proc checked
against the chain's job id: never by name (a root shares the host's pids).
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
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests"))  # e2e_helpers imports waiting from there
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
    cmdline,
    daemon_pid,
    job_active,
    job_restarts,
    node_name,
    node_state,
    parent_pid,
    pid_job,
    running_marker,
    sh,
    squeue_rows,
)
from schedule import Report, Step, execute, proven_check

from chain.app.atomic import TMP_PREFIX

ENDED = ("completed", "failed", "stopped", "cancelled")
# what `chain submit --resume` says when a `chain cancel` is under way (chain.api.submission)
CANCEL_MARK_REFUSAL = "is being cancelled"
# supervisor-kill lands at least this long before the app's own deadline,
# when a chain.app app stops by itself (CHAIN_DEADLINE) even if nobody tells it
SELF_STOP = 8.0
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


# --------------------------------------------------------------------------- faults
class Suite:
    def __init__(self, seed: int, scale: str, workdir: Path, only: tuple[str, ...] = (),
                 mode: str = "submitter") -> None:
        self.only = only
        self.mode = mode
        self.relay = mode == "relay"
        self.rng = random.Random(seed)
        self.report = Report(seed, scale)
        self.long = scale == "long"
        self.node = node_name()
        # development knobs (to show that a weakened setting fails the suite):
        # FAULT_SUITE_MAX_ITER, FAULT_SUITE_SAVE_DELAY, FAULT_SUITE_CHAIN_ARGS
        # (more `chain submit` arguments)
        self.max_iter = int(os.environ.get("FAULT_SUITE_MAX_ITER", "3600" if self.long else "2000"))
        self.calls = SlurmCalls(workdir)
        self.chain = Chain(workdir, {
            "ITER_SECONDS": "0.1", "FAULT_SAVE_DELAY": os.environ.get("FAULT_SUITE_SAVE_DELAY", "0.4"),
            "FAULT_PACE_FILE": str(workdir / "pace"),
        }, self.max_iter)
        self.sampler: Sampler | None = None
        self.pace = 0.25  # seconds per iteration while faults are injected
        self.cluster_disturbed = False
        self.races = 0  # racing commands fired so far (their call-log tags)

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
        at_kill = ch.counter()
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
        counter = ch.counter_text().strip() or "0"  # no file yet (the first save): 0, as chain reads it
        landed = last_inside is not None and not after and tmp_text == f"{value}\n" and counter == str(before)
        proof = (f"app log of pid {pid}: 'inside {value}' then {after or 'nothing'}; chain.app's temporary "
                 f"{tmp.name}: {tmp_text!r}; counter file {counter!r} (last committed {before})")
        return proof, landed

    # -- 7: garbage checkpoint (on a stopped chain, then resumed)
    def garbage_counter(self) -> None:
        ch = self.chain
        real = ch.ckpt.read_text() if ch.ckpt.exists() else None  # none: the first save was killed
        t = time.time()
        ch.ckpt.write_text("v2 iter 10\n")
        ch.resume()
        st = ch.wait_ended(90)
        started = ch.starts_after(t)
        runner_calls = [c for c in self.chain_calls(t) if c.submits_runner(ch.chain_id)]
        # relay: `submit --resume` itself queues the one runner that reads the
        # counter (and stops the chain); no job may queue a successor
        submitted = [c for c in runner_calls if c.job != "-"] if self.relay else runner_calls
        judging = len(runner_calls) - len(submitted)
        ok = (st["state"] in ("stopped", "failed") and "plain integer" in st["reason"] and not started
              and not submitted and judging <= 1 and ch.ckpt.read_text() == "v2 iter 10\n")
        effect = (f"chain {st['state']}: {st['reason']!r}; app started {len(started)} times; "
                  f"counter file left as is")
        proof = (f"no runner sbatch'ed after the garbage was written ({len(submitted)} runner sbatch calls"
                 + (f" from jobs; {judging} by `submit --resume`, the relay's judging runner" if self.relay else "")
                 + "); no app start in the app's log")
        if real is None:
            ch.ckpt.unlink()
        else:
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
        # a new submitter that only started after the runner had ended judges
        # it from its record, without asking Slurm: a timing miss, not a failure
        ok = not early and (bool(looked) or together is None)
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

    # -- 4/5: a daemon stopped and restarted (the one skeleton of both outages)
    def _outage(self, daemon: str, hold: float, proven: Callable[[float], bool], longest: float,
                on_down: Callable[[], None] = lambda: None) -> tuple[int, float, float]:
        """SIGTERM ``daemon`` (its pid from this cluster's pid file), call
        ``on_down`` once it has exited, keep it down ``hold`` s and longer
        (until ``longest`` s after the stop) while ``proven(stopped)`` is
        False, then restart it (dev-cluster up). (pid, stopped, restarting)."""
        pid = daemon_pid(daemon)
        if pid is None:
            raise FaultError(f"{daemon} is not running")
        self.cluster_disturbed = True
        os.kill(pid, signal.SIGTERM)
        stopped = time.time()
        try:
            self.chain.wait(f"{daemon} to exit", lambda: not _alive(pid), 60)
        finally:
            on_down()
        while time.time() < stopped + hold or (time.time() < stopped + longest and not proven(stopped)):
            time.sleep(0.5)
        restarting = time.time()
        up = cluster_up()
        self.cluster_disturbed = False
        if up.returncode != 0:
            raise FaultError(f"dev-cluster up failed: {up.stderr[-500:]}")
        return pid, stopped, restarting

    # -- 4: slurmctld stopped for longer than MessageTimeout
    def stop_slurmctld(self, hold: float) -> None:
        ch = self.chain
        ch.wait_app()
        self.wait_quiet_cluster()
        ch.wait_app()
        if self.relay:
            self.stop_slurmctld_relay(hold)
            return
        time.sleep(self.delay(0.5, 5))
        before = ch.committed()

        def refused_so_far(stopped: float) -> list[Call]:
            return [c for c in self.chain_calls(stopped) if c.job != "-" and c.rc != 0]

        # hold at least `hold`; longer (at most 60 s more) until a request of
        # the chain's jobs has come back refused (a client retries for a
        # while before it gives up: a short outage may never be noticed)
        pid, stopped, restarting = self._outage("slurmctld", hold, lambda t: bool(refused_so_far(t)), hold + 60)
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

    def _held_sbatch(self, timeout: float) -> tuple[str, str]:
        """Gate the jobs' sbatch calls (SlurmCalls.gate) until the next
        runner, taking over, queues its successor: (its job id, the name)."""
        ch, calls = self.chain, self.calls
        calls.held.unlink(missing_ok=True)
        calls.gate.touch()

        def held() -> tuple[str, str] | None:
            try:
                words = calls.held.read_text().split()
            except OSError:
                return None
            name = next((w.split("=", 1)[1] for w in words if w.startswith("--job-name=")), "")
            return (words[0], name) if words else None

        try:
            got = ch.wait("a runner's sbatch of its successor at the gate", held, timeout, 0.05)
            return str(got[0]), str(got[1])
        except FaultError:
            calls.gate.unlink(missing_ok=True)
            raise

    def stop_slurmctld_relay(self, hold: float) -> None:
        """Relay: slurmctld goes down under the sbatch with which the runner
        taking over queues its successor (held at the shim's gate until the
        daemon has exited, then let through against the dead controller)."""
        ch = self.chain
        job, name = self._held_sbatch(90)
        before = ch.committed()  # the predecessor's app has ended: the successor's is yet to start

        def refused(stopped: float, until: float = float("inf")) -> list[Call]:
            return [c for c in self.chain_calls(stopped, until) if c.prog == "sbatch" and c.job == job
                    and f"--job-name={name}" in c.args and c.rc != 0]

        pid, stopped, restarting = self._outage("slurmctld", hold, lambda t: bool(refused(t)), hold + 60,
                                                on_down=lambda: self.calls.gate.unlink(missing_ok=True))

        def settled() -> bool:  # chain's retries (relay.SUBMIT_PATIENCE, 300 s) succeed, or give up
            return any(c.rc == 0 for c in self.chain_calls(stopped) if c.prog == "sbatch"
                       and f"--job-name={name}" in c.args) or bool(ch.state().get("relay_broken"))

        ch.wait(f"the sbatch of {name} to go through (or the relay to break)", settled, 330, interval=0.5)
        nxt = self.progress_after(before, 240)
        st = ch.state()
        mine = [c for c in self.chain_calls(stopped) if c.prog == "sbatch" and f"--job-name={name}" in c.args]
        failed = refused(stopped, restarting)
        good = [c for c in mine if c.rc == 0]
        queued = sorted({j for j, n, _ in squeue_rows() or [] if n == name})
        ok = st["state"] == "running" and len(good) == 1 and not st.get("relay_broken") and len(queued) <= 1
        effect = (f"held {restarting - stopped:.0f}s; chain {st['state']}, relay_broken "
                  f"{st.get('relay_broken') or 'no'}; {len(good)} successful sbatch of {name} (job ids in the "
                  f"queue named so: {queued}); next checkpoint {nxt}")
        proof = (f"runner {job}'s sbatch of its successor {name} ran {len(failed)} times refused while slurmctld "
                 f"was down" + (f" (first +{failed[0].start - stopped:.1f}s into it: {failed[0].err[:100]!r})"
                                if failed else "")
                 + (f", then rc 0 +{good[0].start - restarting:.1f}s after the restart" if good else ""))
        injected = f"SIGTERM slurmctld (pid {pid}) under runner {job}'s sbatch of {name}, restarted by dev-cluster up"
        if not ok:
            self.report.fault("slurmctld-down", injected, effect, False, proof)
            raise FaultError(effect)
        if not failed:
            raise NotProven(proof)
        self.report.fault("slurmctld-down", injected, effect, ok, proof)

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
        before = ch.committed()

        def judged_without_accounting(stopped: float) -> list[Call]:
            return [c for c in self.chain_calls(stopped) if c.prog == "sacct" and c.job != "-"
                    and c.names(runner) and c.rc != 0]

        # hold at least `hold`; longer (up to 90 s) until the next app has started
        pid, stopped, restarting = self._outage("slurmdbd", hold, lambda t: bool(ch.starts_after(t)), 90)
        st = ch.state()
        nxt = self.progress_after(before, 180)
        failed_sacct = [c for c in judged_without_accounting(stopped) if c.start < restarting]
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
        # the chain's jobs on the node: the runner and the submitter (relay:
        # the runner alone; its queued successor waits on it, on no node)
        st0 = ch.state()
        kinds = (("runner", runner),) if self.relay else (("runner", runner), ("submitter", st0["submitter_job_id"]))
        jobs = [j for _, j in kinds]
        before_states = {j: (self.s.states(j) or ["?"])[-1] for j in jobs}
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
        after = {j: self.s.states(j, t) for j in jobs}
        restarts = {j: job_restarts(j) for j in jobs}
        requeued = {j: "PENDING" in after[j] or "REQUEUED" in after[j] or (restarts[j] or 0) > 0 for j in jobs}
        ok = nxt is not None and st["state"] == "running"
        effect = (f"chain {st['state']} {st['reason']!r}, not resumed by the driver; first checkpoint of an app "
                  f"started after it: {nxt}")
        proof = "; ".join(f"{kind} {j}: {before_states[j]} -> {' -> '.join(after[j]) or '(not seen)'}, "
                          f"Restarts={restarts[j]}" for kind, j in kinds)
        injected = (f"scontrol update nodename={self.node} state=down for {hold:.0f}s ("
                    + ", ".join(f"{kind} {j}" for kind, j in kinds) + ")")
        if not ok:
            self.report.fault("node-down", injected, effect, False, proof)
            raise FaultError(f"{effect}; {proof}")
        if not all(requeued.values()):
            self.report.fault("node-down", injected, effect, False, proof)
            raise FaultError(f"jobs were not requeued: {proof}")
        self.report.fault("node-down", injected, effect, ok, proof)

    # -- 8: SIGKILL of the runner's supervising process while its app runs
    def kill_supervisor(self) -> None:
        ch = self.chain
        job, app = self.early_app(SELF_STOP)
        time.sleep(self.delay(0.5, 2))
        # the runner is the app's parent (`bash -c` execs the one command),
        # checked by its command line and its job id, never found by name
        runner = parent_pid(app) or 0
        argv = cmdline(runner)
        stop_at = float(ch.record(job).get("stop_at") or 0)
        if pid_job(runner) != job or "_runner" not in argv or not _alive(app) or stop_at - time.time() < SELF_STOP:
            raise NotProven(f"app {app} of job {job}: parent {runner} ({' '.join(argv[:4])!r}, job "
                            f"{pid_job(runner)}), stop signal in {stop_at - time.time():.1f}s")
        os.kill(runner, signal.SIGKILL)
        killed_at = time.time()
        ch.wait(f"runner process {runner} to die", lambda: not _alive(runner), 30, interval=0.05)
        # told at once (PDEATHSIG, the guard's pipe), the app saves and exits
        # in well under a second; the bound stays below SELF_STOP, so an app
        # that only stopped at its own deadline (CHAIN_DEADLINE) fails it
        grace = 4.0
        try:
            ch.wait(f"app {app} to exit", lambda: not _alive(app), SELF_STOP + 30, interval=0.1)
        except FaultError:
            pass  # it outlived its runner: judged below, from its own log
        app_events = [ev for ev in ch.events() if int(ev[4]) == app]
        last_alive = time.time() if _alive(app) else float(app_events[-1][0]) if app_events else killed_at
        ran_before = [ev for ev in app_events if ev[1] == "iter" and killed_at - 3 < float(ev[0]) < killed_at]
        exit_ev = next((ev for ev in app_events if ev[1] == "exit"), None)
        at_exit = int(exit_ev[2]) if exit_ev else ch.committed()
        slurm = self.s.states(job, killed_at - 1)
        outlived = last_alive - killed_at
        outcome = self._goes_on_or_ends(killed_at, at_exit) if outlived <= grace else (False, "not waited for")
        ok = outlived <= grace and outcome[0]
        effect = (f"app {app} last logged +{outlived:.1f}s after its runner died (its exit: "
                  f"{' '.join(exit_ev[1:3]) + ' code ' + exit_ev[5] if exit_ev and len(exit_ev) > 5 else 'none'})"
                  f"; {outcome[1]}")
        proof = (f"pid {runner} was job {job}'s `{' '.join(argv[1:4])}` (its /proc environ), the parent of app "
                 f"{app}, which logged {len(ran_before)} iterations in the 3 s before the SIGKILL; gone "
                 f"{'at once' if not _alive(runner) else '?'}; squeue: {job} {' -> '.join(slurm) or '(not seen)'}")
        injected = f"SIGKILL pid {runner} (job {job}'s chain _runner) while its app {app} ran"
        if not ok:
            self.report.fault("supervisor-kill", injected, effect, False, proof)
            raise FaultError(f"{effect}; {proof}")
        if not ran_before:
            raise NotProven(proof)
        self.report.fault("supervisor-kill", injected, effect, ok, proof)

    def early_app(self, ahead: float) -> tuple[str, int]:
        """A running app at least ``ahead`` s before its stop signal (this
        one's, else the next runner's)."""
        ch = self.chain
        job, app = ch.wait_app()
        for _ in range(6):
            if float(ch.record(job).get("stop_at") or 0) - time.time() >= ahead + 2:
                return job, app
            job, app = ch.wait("the next runner's app", functools.partial(self._app_not_of, job), 120)
        raise NotProven(f"no app found {ahead + 2:.0f}s before its stop signal")

    def _app_not_of(self, job: str) -> tuple[str, int] | None:
        running = self.chain.app_running()
        return running if running is not None and running[0] != job else None

    def _goes_on_or_ends(self, since: float, at_exit: int) -> tuple[bool, str]:
        """After a fault: the next app starts where the last one's exit left
        the counter (no lost iteration) and checkpoints beyond it, or the
        chain ends with a reason (then it is resumed, as documented)."""
        ch = self.chain

        def moved() -> str | None:
            starts = ch.starts_after(since)
            st = ch.state()
            if starts and ch.committed() > int(starts[0][2]):
                return "on"
            return "ended" if st["state"] in ENDED else None

        how = ch.wait("the chain to go on or end", moved, 180, interval=0.5)
        st = ch.state()
        if how == "ended":
            ok = bool(st["reason"])
            resumed = ch.resume() if ok else ""
            return ok, f"chain {st['state']}: {st['reason']!r}; resumed ({resumed})"
        first = ch.starts_after(since)[0]
        ok = int(first[2]) == at_exit
        return ok, (f"the next app (job {first[3]}) started at {first[2]} (the killed one's exit left "
                    f"{at_exit}); chain {st['state']}, next checkpoint {ch.committed()}")

    # -- 9: racing commands: cancel + resume at once on a live chain, then two resumes at once
    def race(self, *commands: tuple[str, ...]) -> list[tuple[str, float, float, int, str]]:
        """Start the commands back to back (each spends longer in Python's
        start-up than the gap, so they reach the chain's lock together);
        (tag, start, end, exit code, last line of output) each. The tag goes
        to the Slurm call log (FAULT_CALLER) to tell their calls apart."""
        started = []
        self.races += 1
        for i, args in enumerate(commands):
            tag = f"race{self.races}.{i}-{args[0]}"  # unique to this race
            env = {**os.environ, **self.chain.env, "FAULT_CALLER": tag}
            proc = subprocess.Popen([sys.executable, "-m", "chain", *args], cwd=self.chain.workdir, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            started.append((tag, time.time(), proc))
        out = []
        for tag, t, proc in started:
            text, _ = proc.communicate(timeout=240)
            lines = text.strip().splitlines()
            out.append((tag, t, time.time(), proc.returncode, lines[-1] if lines else ""))
        return out

    def race_proof(self, raced: list[tuple[str, float, float, int, str]]) -> tuple[str, bool]:
        """Both started within 50 ms, both ran at once, and each acted on the
        chain: reached Slurm (tagged calls in the call log), or was refused
        on the mark of the cancel it raced (a resume that saw the cancel in
        progress: it came after that cancel took the lock); who got first."""
        calls = self.calls.calls()
        first = {tag: min((c.start for c in calls if c.job == "-" and c.who == tag and c.start >= t), default=None)
                 for tag, t, *_ in raced}
        gap = abs(raced[0][1] - raced[1][1])
        overlap = min(r[2] for r in raced) - max(r[1] for r in raced)
        order = sorted((t, tag) for tag, t in first.items() if t is not None)
        marked = [tag for tag, _, _, rc, last in raced if rc != 0 and first[tag] is None and CANCEL_MARK_REFUSAL in last]
        landed = gap < 0.05 and overlap > 0 and len(order) + len(marked) == 2
        proof = (f"started {gap * 1000:.0f} ms apart, ran together {overlap:.1f}s; first Slurm call of each: "
                 + ", ".join(f"{tag} +{t - raced[0][1]:.2f}s" for t, tag in order)
                 + f" ({len(order)} of 2 reached Slurm"
                 + (f"; refused on the cancel's mark: {', '.join(marked)})" if marked else ")"))
        return proof, landed

    def racing_commands(self) -> None:
        ch = self.chain
        ch.wait_app()
        time.sleep(self.delay(0.5, 3))
        a = self.race(("cancel",), ("submit", "--resume"))
        proof_a, landed_a = self.race_proof(a)
        consistent = self._state_agrees_with_queue()
        ended = ch.state()["state"] in ENDED
        if ended:
            ch.quiet()
        t_b = time.time()
        b = self.race(("submit", "--resume"), ("submit", "--resume"))
        proof_b, landed_b = self.race_proof(b)
        winners = [r for r in b if r[3] == 0]
        refusals = [r for r in b if r[3] != 0]
        drivers = self._drivers_submitted(t_b)
        later = self._state_agrees_with_queue()
        nxt = self.progress_after(ch.committed(), 180)
        ok = (a[0][3] == 0 and consistent[0] and len(winners) == (1 if ended else 0)
              and len(drivers) == len(winners) and later[0])
        effect = (f"cancel|resume: {[(r[0], r[3], r[4][:90]) for r in a]}; then {consistent[1]}; "
                  f"resume|resume: {[(r[0], r[3], r[4][:90]) for r in b]}; new drivers queued by "
                  f"{sorted(drivers) or 'none'}; then {later[1]}; next checkpoint {nxt}")
        proof = f"cancel|resume {proof_a}; resume|resume {proof_b}; refused: {len(refusals)}"
        injected = "chain cancel + chain submit --resume at once (live chain), then two chain submit --resume at once"
        if not ok:
            self.report.fault("racing-commands", injected, effect, False, proof)
            raise FaultError(f"{effect}; {proof}")
        if not (landed_a and landed_b):
            raise NotProven(proof)
        self.report.fault("racing-commands", injected, effect, ok, proof)

    def _drivers_submitted(self, since: float) -> set[str]:
        """The racing commands that queued a driver (a submitter; relay: a runner)."""
        kind = ".r" if self.relay else ".s"
        return {c.who for c in self.chain_calls(since) if c.job == "-" and c.prog == "sbatch" and c.rc == 0
                and f"--job-name={self.chain.chain_id}{kind}" in c.args}

    def _state_agrees_with_queue(self) -> tuple[bool, str]:
        """Once the commands are done, chain's state and Slurm's queue tell
        the same story within 90 s: ended and none of its jobs queued, or
        live and one of them queued or running."""
        ch = self.chain

        def agree() -> str | None:
            st, live = ch.state(), ch.live_jobs()
            if (st["state"] in ENDED) != bool(live):
                return f"chain {st['state']} ({st['reason'] or '-'}), jobs in the queue: {live or 'none'}"
            return None

        try:
            return True, str(ch.wait("chain's state to agree with the queue", agree, 90, interval=0.5))
        except FaultError:
            st = ch.state()
            return False, f"chain {st['state']} but jobs in the queue: {ch.live_jobs() or 'none'}"

    # -- the run
    def plan(self) -> list[Step]:
        rounds = 2 if self.long else 1
        steps: list[Step] = []
        for r in range(rounds):
            mixed = [
                Step("app-sigkill(retries)", "app-sigkill-retries", lambda: self.kill_app(True)),
                Step("scancel-runner", "scancel-runner", self.scancel_runner),
                Step("supervisor-kill", "supervisor-kill", self.kill_supervisor),
                Step("racing-commands", "racing-commands", self.racing_commands),
            ]
            if not self.relay:  # relay has no submitter job
                mixed += [Step("submitter-scancel", "submitter-scancel", lambda: self.kill_submitter("scancel")),
                          Step("submitter-sigkill", "submitter-kill", lambda: self.kill_submitter("kill"))]
            hold_ctld, hold_dbd, hold_node = self.delay(22, 30), self.delay(15, 25), self.delay(4, 10)
            mixed += [
                Step(f"slurmctld-down({hold_ctld:.0f}s)", "slurmctld-down",
                     functools.partial(self.stop_slurmctld, hold_ctld)),
                Step(f"node-down({hold_node:.0f}s)", "node-down", functools.partial(self.node_down, hold_node)),
            ]
            if not self.relay:  # aimed at the submitter's accounting query of its runner
                mixed.append(Step(f"slurmdbd-down({hold_dbd:.0f}s)", "slurmdbd-down",
                                  functools.partial(self.stop_slurmdbd, hold_dbd)))
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
        driver = ["--mode", "relay"] if self.relay else \
            ["--mode", "submitter", "--submitter-time", "2:00", "--submitter-margin", "20", "--poll-max", "10"]
        args = ["--backend", "slurm", "--max-iter", str(self.max_iter), "--app-cmd", "python3 app.py",
                "--checkpoint-every", "10", "--runner-time", "0:20", "--runner-margin", "6", *driver, *hooks,
                *shlex.split(os.environ.get("FAULT_SUITE_CHAIN_ARGS", ""))]
        self.report.settings = {"mode": self.mode, "MAX_ITER": self.max_iter, "chain": " ".join(args[2:]), "pace": self.pace,
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
        self.sampler = Sampler(ch.chain_id, relay=self.relay)
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
        rep.check("never a submitter, never two runners running or queued, in squeue" if self.relay
                  else "never two runners / submitters in squeue", not s.violations and s.samples > 50,
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
        # made by the final submitter job (relay: the last runner's) after
        # the last app exited.
        usage = [c for c in self.chain_calls(done_at) if c.prog == "sacct" and "-X" not in c.args.split()
                 and c.job != "-"]
        rep.check("the report hook ran once after the final completion (Slurm call log)",
                  len([c for c in usage if c.rc == 0]) == 1,
                  f"{len(usage)} usage sacct calls after the last app exit "
                  f"({[(c.job, c.rc) for c in usage]})")


def run_suite(seed: int, scale: str = "bounded", workdir: Path | None = None,
              only: tuple[str, ...] = (), mode: str = "submitter") -> Report:
    marker = running_marker()
    marker.write_text(f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')} seed {seed} mode {mode}\n")
    try:
        cluster_env()
        up = cluster_up()
        if up.returncode != 0:
            raise FaultError(f"dev-cluster up failed: {up.stderr[-800:]}")
        base = workdir or Path(tempfile.mkdtemp(prefix="chain-faults-"))
        base.mkdir(parents=True, exist_ok=True)
        suite = Suite(seed, scale, base, only, mode)
        try:
            return suite.run()
        finally:
            if suite.cluster_disturbed:
                suite.restore()
    finally:
        marker.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--long", action="store_true", help="a longer chain, every fault twice")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--only", action="append", default=[], help="run only faults starting with this")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    parser.add_argument("--mode", choices=("submitter", "relay"), default="submitter",
                        help="the chain's mode (relay: the faults that apply to it)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    print(f"fault suite: seed {seed} ({'long' if args.long else 'bounded'}, {args.mode} mode)", flush=True)
    report = run_suite(seed, "long" if args.long else "bounded", args.workdir, tuple(args.only), args.mode)
    print()
    print(report.text())
    if args.json:
        args.json.write_text(json.dumps(report.__dict__, indent=1, default=str))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
