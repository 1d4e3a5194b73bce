"""Fault-injection suite (issue 7): a long chain on the real dev cluster while
a driver injects faults at random (seeded, reproducible) moments, then checks
invariants from the app's iteration log, the chain's own files and Slurm.

Faults: SIGKILL of the app (also mid-save), user scancel of the runner,
scancel / SIGKILL of the submitter, slurmctld stopped, slurmdbd stopped, the
node set DOWN and back, the counter file replaced by garbage.

    python3 tests/faults/driver.py [--seed N] [--long]     (or: bash scripts/fault-suite)

The cluster is always restored (``scripts/dev-cluster up``, node resumed).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
RUN_DIR = Path(os.environ.get("CHAIN_DEV_CLUSTER_DIR", "/var/lib/chain-dev-cluster")) / "run"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


sys.path.insert(0, str(REPO / "tests" / "e2e"))
from e2e_helpers import IterLog, chain_cmd  # noqa: E402  (tests/e2e/e2e_helpers.py)

ENDED = ("completed", "failed", "stopped", "cancelled")
LIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
               "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}
# A successor submitter pending on its predecessor is by design: count RUNNING ones.
SUBMITTER_LIVE = {"RUNNING", "COMPLETING", "CONFIGURING"}


class FaultError(AssertionError):
    pass


# --------------------------------------------------------------------------- shell
def sh(argv: list[str], timeout: float = 30, check: bool = False) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        if check:
            raise FaultError(f"{' '.join(argv)} timed out") from exc
        return subprocess.CompletedProcess(argv, 124, "", "timed out")
    if check and proc.returncode != 0:
        raise FaultError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def node_name() -> str:
    return sh(["hostname", "-s"], check=True).stdout.strip()


def cluster_env() -> None:
    """SLURM_CONF etc. from `dev-cluster env` into os.environ."""
    out = sh(["bash", str(DEV_CLUSTER), "env"], check=True).stdout
    for line in out.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            os.environ[name] = value.strip().strip("'\"")


def cluster_up() -> subprocess.CompletedProcess[str]:
    return sh(["bash", str(DEV_CLUSTER), "up"], timeout=300)


def daemon_pid(name: str) -> int | None:
    try:
        pid = int((RUN_DIR / f"{name}.pid").read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    return pid if comm == name else None


def squeue_rows() -> list[tuple[str, str, str]] | None:
    """(job id, name, state) of every job in slurmctld's memory; None when
    squeue does not answer."""
    proc = sh(["squeue", "-h", "--states=all", "-o", "%i|%j|%T"], timeout=8)
    if proc.returncode != 0:
        return None
    rows = []
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def node_state(node: str) -> str:
    return sh(["sinfo", "-h", "-n", node, "-o", "%T"], timeout=15).stdout.strip()


# --------------------------------------------------------------------------- report
@dataclass
class Report:
    seed: int
    scale: str
    t0: float = field(default_factory=time.time)
    settings: dict[str, Any] = field(default_factory=dict)
    schedule: list[str] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    invariants: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration: float = 0.0

    def t(self) -> float:
        return round(time.time() - self.t0, 1)

    def fault(self, name: str, injected: str, effect: str, ok: bool, **extra: Any) -> None:
        self.faults.append({"fault": name, "at": self.t(), "injected": injected, "effect": effect, "ok": ok,
                            **extra})
        print(f"[{self.t():7.1f}s] fault {name}: {injected} -> {'OK' if ok else 'FAILED'}: {effect}", flush=True)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.invariants.append({"invariant": name, "ok": bool(ok), "detail": detail})

    def note(self, text: str) -> None:
        self.notes.append(f"[{self.t():.1f}s] {text}")
        print(f"[{self.t():7.1f}s] {text}", flush=True)

    @property
    def ok(self) -> bool:
        return all(f["ok"] for f in self.faults) and all(i["ok"] for i in self.invariants) and bool(self.invariants)

    def text(self) -> str:
        lines = [(f"fault suite: seed {self.seed}, scale {self.scale}, {self.duration:.0f} s, "
                  f"{'PASSED' if self.ok else 'FAILED'}"),
                 "settings: " + " ".join(f"{k}={v}" for k, v in self.settings.items()),
                 "schedule (seeded): " + "; ".join(self.schedule), "", "faults:"]
        for f in self.faults:
            lines.append(f"  [{f['at']:7.1f}s] {'ok  ' if f['ok'] else 'FAIL'} {f['fault']}: {f['injected']}")
            lines.append(f"             effect: {f['effect']}")
        lines += ["", "invariants:"]
        for i in self.invariants:
            lines.append(f"  {'ok  ' if i['ok'] else 'FAIL'} {i['invariant']}: {i['detail']}")
        if self.notes:
            lines += ["", "notes:"] + [f"  {n}" for n in self.notes]
        return "\n".join(lines)


# --------------------------------------------------------------------------- sampler
class Sampler(threading.Thread):
    """squeue every ~0.5 s: never two runners of the chain pending/running,
    never two submitters running."""

    def __init__(self, chain_id: str, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.chain_id = chain_id
        self.interval = interval
        self.samples = 0
        self.failed = 0
        self.violations: list[str] = []
        self.foreign: set[str] = set()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            rows = squeue_rows()
            if rows is None:
                self.failed += 1
            else:
                self.samples += 1
                self._judge(rows)
            self._halt.wait(self.interval)

    def _judge(self, rows: list[tuple[str, str, str]]) -> None:
        prefix = self.chain_id + "."
        runners, submitters = [], []
        for job, name, state in rows:
            if not name.startswith(prefix):
                if state in LIVE_STATES:
                    self.foreign.add(name)
                continue
            kind = name[len(prefix):]
            if kind.startswith("r") and state in LIVE_STATES:
                runners.append(f"{job}:{name}:{state}")
            elif kind.startswith("s") and state in SUBMITTER_LIVE:
                submitters.append(f"{job}:{name}:{state}")
        if len(runners) > 1 or len(submitters) > 1:
            self.violations.append(f"{time.strftime('%H:%M:%S')} runners={runners} submitters={submitters}")

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)


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

    def counter(self) -> int:
        return int(self.ckpt.read_text().strip())

    def committed(self) -> int:
        last = 0
        for ev in self.events():
            if ev[1] == "ckpt":
                last = int(ev[2])
        return last

    def set_pace(self, seconds: float) -> None:
        tmp = self.workdir / ".pace.tmp"
        tmp.write_text(f"{seconds}\n")
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
        for ev in self.events():
            if ev[3] == job and ev[1] == "start":
                pid = int(ev[4])
            elif ev[3] == job and ev[1] in ("exit",):
                pid = None
        if pid is None or not any(ev[3] == job and ev[1] == "iter" for ev in self.events()[-50:]):
            return None
        return (job, pid) if _alive(pid) else None

    def wait_app(self, timeout: float = 120) -> tuple[str, int]:
        job, pid = self.wait("a running app", self.app_running, timeout)
        return str(job), int(pid)

    def resume(self, *extra: str) -> str:
        """The documented `chain submit --resume`, once the chain's last
        submitter has left the queue (it may still be running the report
        hook after it marked the chain ended: resume refuses that)."""
        sub = self.state().get("submitter_job_id", "")
        if sub:
            self.wait(f"submitter {sub} to leave the queue", lambda: not job_active(sub), 120, interval=0.5)
        out = self.cmd("submit", "--resume", *extra)
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def job_active(job_id: str) -> bool:
    proc = sh(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"], timeout=15)
    return proc.returncode == 0 and proc.stdout.strip() in LIVE_STATES


# --------------------------------------------------------------------------- faults
class Suite:
    def __init__(self, seed: int, scale: str, workdir: Path, only: tuple[str, ...] = ()) -> None:
        self.only = only
        self.rng = random.Random(seed)
        self.report = Report(seed, scale)
        self.long = scale == "long"
        self.node = node_name()
        self.max_iter = 1200 if self.long else 400
        self.chain = Chain(workdir, {
            "ITER_SECONDS": "0.1", "FAULT_SAVE_DELAY": "0.4", "FAULT_PACE_FILE": str(workdir / "pace"),
        }, self.max_iter)
        self.sampler: Sampler | None = None
        self.pace = 0.25  # seconds per iteration while faults are injected
        self.cluster_disturbed = False

    # -- helpers
    def delay(self, lo: float, hi: float) -> float:
        return round(self.rng.uniform(lo, hi), 2)

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
        """Wait until the committed checkpoint passes ``counter`` (the chain
        goes on); returns the new value."""
        return int(self.chain.wait(f"a checkpoint beyond {counter}",
                                   lambda: (c := self.chain.committed()) > counter and c, timeout))

    # -- 1: SIGKILL of the app (mid-save)
    def kill_app(self, retries: bool) -> None:
        ch = self.chain
        job, _ = ch.wait_app()
        time.sleep(self.delay(0.5, 4))
        seen = len(ch.events())

        def saving() -> tuple[int, int] | None:
            evs = ch.events()
            for ev in evs[seen:]:
                if ev[1] == "saving" and ev[3] == job:
                    return int(ev[4]), int(ev[2])
            return None

        pid, value = ch.wait("the app saving a checkpoint", saving, 60, interval=0.02)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        before = ch.committed()
        mid_save = any(p.name.startswith(".tmp-state_iter.txt") for p in ch.workdir.iterdir())
        injected = (f"SIGKILL app pid {pid} of runner {job} while saving counter {value} "
                    f"(tmp written, rename pending: {mid_save}); last committed {before}")
        if not retries:
            st = ch.wait_ended(90)
            ok = st["state"] == "failed" and ("137" in st["reason"] or "SIGKILL" in st["reason"])
            counter = ch.counter()
            ok = ok and counter == before
            effect = f"chain {st['state']}: {st['reason']!r}; counter intact at {counter}"
            self.report.fault("app-sigkill", injected, effect, ok, killed_at=killed_at)
            if not ok:
                raise FaultError(effect)
        else:
            def judged() -> dict[str, Any] | None:
                return next((r for r in ch.runners() if r.get("job_id") == job), None)

            entry = ch.wait("the killed runner judged", judged, 90)
            st = ch.state()
            nxt = self.progress_after(before, 120)
            ok = entry["verdict"] == "continue" and "retry" in entry["reason"] and st["state"] == "running"
            effect = (f"runner judged {entry['verdict']}: {entry['reason']!r}; chain {st['state']}; "
                      f"next checkpoint {nxt} (resumed from {before})")
            self.report.fault("app-sigkill-retries", injected, effect, ok)
            if not ok:
                raise FaultError(effect)

    # -- 7: garbage checkpoint (on a stopped chain, then resumed)
    def garbage_counter(self) -> None:
        ch = self.chain
        real = ch.ckpt.read_text()
        starts = sum(1 for ev in ch.events() if ev[1] == "start")
        ch.ckpt.write_text("v2 iter 10\n")
        ch.resume()
        st = ch.wait_ended(90)
        new_starts = sum(1 for ev in ch.events() if ev[1] == "start")
        ok = (st["state"] in ("stopped", "failed") and "plain integer" in st["reason"] and new_starts == starts
              and ch.ckpt.read_text() == "v2 iter 10\n")
        effect = (f"chain {st['state']}: {st['reason']!r}; app started {new_starts - starts} times; "
                  f"counter file left as is")
        ch.ckpt.write_text(real)
        self.report.fault("garbage-counter", "counter replaced by 'v2 iter 10', chain submit --resume", effect, ok)
        if not ok:
            raise FaultError(effect)

    # -- 2: user scancel of the runner
    def scancel_runner(self) -> None:
        ch = self.chain
        job, _ = ch.wait_app()
        time.sleep(self.delay(0.5, 6))
        sh(["scancel", job], check=True)
        st = ch.wait_ended(90)
        ok = st["state"] == "cancelled" and st["reason"] == "runner cancelled by user"
        before = ch.committed()
        resumed = ch.resume()
        nxt = self.progress_after(before, 120)
        effect = f"chain {st['state']}: {st['reason']!r}; resumed ({resumed}); next checkpoint {nxt}"
        self.report.fault("scancel-runner", f"scancel {job}", effect, ok)
        if not ok:
            raise FaultError(effect)

    # -- 3: scancel / SIGKILL of the submitter
    def kill_submitter(self, how: str) -> None:
        ch = self.chain
        runner, _ = ch.wait_app()
        time.sleep(self.delay(0.3, 5))
        sub = ch.state()["submitter_job_id"]
        argv = ["scancel", sub] if how == "scancel" else ["scancel", "--signal=KILL", "--batch", sub]
        sh(argv, check=True)
        ch.wait(f"submitter {sub} to leave the queue", lambda: not job_active(sub), 60, interval=0.5)
        st = ch.state()
        before = ch.committed()
        resumed = ch.resume()
        nxt = self.progress_after(before, 120)
        adopted = f"waiting for runner {st['runner_seq']} (job {st['runner_job_id']})" in ch.log_text() \
            if st.get("runner_live") else True
        ok = st["state"] == "running" and adopted
        effect = (f"chain left {st['state']} (runner {st['runner_job_id']} live={st['runner_live']}); "
                  f"resumed ({resumed}); live runner adopted: {adopted}; next checkpoint {nxt}")
        self.report.fault(f"submitter-{how}", " ".join(argv) + f" (runner {runner} running)", effect, ok)
        if not ok:
            raise FaultError(effect)

    # -- 4 / 5: a daemon stopped for a while
    def stop_daemon(self, name: str, hold: float) -> None:
        ch = self.chain
        ch.wait_app()
        self.wait_quiet_cluster()
        ch.wait_app()
        time.sleep(self.delay(0.5, 5))
        pid = daemon_pid(name)
        if pid is None:
            raise FaultError(f"{name} is not running")
        judged_before = len(ch.runners())
        before = ch.committed()
        self.cluster_disturbed = True
        os.kill(pid, signal.SIGTERM)
        stopped = time.time()
        ch.wait(f"{name} to exit", lambda: not _alive(pid), 60)
        # slurmdbd: hold at least until a runner has been judged without it
        deadline = stopped + hold
        while time.time() < deadline or (name == "slurmdbd" and len(ch.runners()) == judged_before
                                         and time.time() < stopped + 90):
            time.sleep(0.5)
        held = time.time() - stopped
        up = cluster_up()
        self.cluster_disturbed = False
        if up.returncode != 0:
            raise FaultError(f"dev-cluster up failed: {up.stderr[-500:]}")
        st = ch.state()
        judged = ch.runners()[judged_before:]
        nxt = self.progress_after(before, 180)
        st2 = ch.state()
        log = ch.log_text()
        retried = len(re.findall(r"failed, retrying|query of runner .* failed", log))
        ok = st["state"] == "running" and st2["state"] == "running"
        detail = ""
        if judged:
            j = judged[0]
            detail = f"; runner {j['job_id']} judged during the outage: {j['state'] or '-'} {j['verdict']}"
            if name == "slurmdbd":
                ok = ok and j["verdict"] == "continue"
        effect = (f"held {held:.0f}s; chain stayed {st['state']}{detail}; {retried} failed Slurm requests "
                  f"logged so far; next checkpoint {nxt}")
        self.report.fault(f"{name}-down", f"SIGTERM {name} (pid {pid}), restarted by dev-cluster up", effect, ok)
        if not ok:
            raise FaultError(effect)

    # -- 6: node DOWN and back
    def node_down(self, hold: float) -> None:
        ch = self.chain
        ch.wait_app()
        self.wait_quiet_cluster()
        runner, _ = ch.wait_app()
        time.sleep(self.delay(0.5, 5))
        st0 = ch.state()
        sub = st0["submitter_job_id"]
        self.cluster_disturbed = True
        sh(["scontrol", "update", f"nodename={self.node}", "state=down", "reason=fault-suite"], check=True)
        time.sleep(2)
        seen = {j: s for j, n, s in squeue_rows() or [] if j in (runner, sub)}
        time.sleep(hold)
        back = sh(["scontrol", "update", f"nodename={self.node}", "state=resume"])
        if back.returncode != 0 and node_state(self.node).startswith("down"):
            raise FaultError(f"cannot resume node {self.node}: {back.stderr.strip()}")
        self.cluster_disturbed = False
        after = {j: s for j, n, s in squeue_rows() or [] if j in (runner, sub)}
        resumed = ""
        # Requeued jobs run again by themselves; a submitter that ended
        # (NODE_FAIL) needs the documented resume.
        deadline = time.time() + 400
        nxt = None
        starts = sum(1 for ev in ch.events() if ev[1] == "start")
        while time.time() < deadline:
            # progress means an app started after the fault checkpointing
            # beyond what was committed (the killed app's own exit save
            # does not count)
            evs = ch.events()
            new_starts = [i for i, ev in enumerate(evs) if ev[1] == "start"][starts:]
            if new_starts:
                later = [int(ev[2]) for ev in evs[new_starts[0]:] if ev[1] == "ckpt"]
                if later and later[-1] > int(evs[new_starts[0]][2]):
                    nxt = later[-1]
                    break
            st = ch.state()
            if st["state"] in ENDED:
                break
            sub_now = st["submitter_job_id"]
            if not resumed and not job_active(sub_now) and time.time() > deadline - 390:
                time.sleep(3)
                if not job_active(ch.state()["submitter_job_id"]) and ch.state()["state"] not in ENDED:
                    resumed = ch.resume()
            time.sleep(1)
        st = ch.state()
        ok = nxt is not None and st["state"] == "running"
        effect = (f"at DOWN: {seen}; after resume: {after}; "
                  + (f"driver resumed ({resumed}); " if resumed else "chain recovered by itself; ")
                  + f"chain {st['state']} {st['reason']!r}; first checkpoint of an app started after it: {nxt}")
        self.report.fault("node-down", f"scontrol update nodename={self.node} state=down for {hold:.0f}s "
                          f"(runner {runner}, submitter {sub})", effect, ok)
        if not ok:
            raise FaultError(effect)

    # -- the run
    def plan(self) -> list[tuple[str, Callable[[], None]]]:
        rounds = 2 if self.long else 1
        steps: list[tuple[str, Callable[[], None]]] = []
        for r in range(rounds):
            mixed: list[tuple[str, Callable[[], None]]] = [
                ("app-sigkill(retries)", lambda: self.kill_app(True)),
                ("scancel-runner", self.scancel_runner),
                ("submitter-scancel", lambda: self.kill_submitter("scancel")),
                ("submitter-sigkill", lambda: self.kill_submitter("kill")),
            ]
            hold_ctld, hold_dbd, hold_node = self.delay(22, 30), self.delay(15, 25), self.delay(4, 10)
            mixed += [
                (f"slurmctld-down({hold_ctld:.0f}s)", functools.partial(self.stop_daemon, "slurmctld", hold_ctld)),
                (f"slurmdbd-down({hold_dbd:.0f}s)", functools.partial(self.stop_daemon, "slurmdbd", hold_dbd)),
                (f"node-down({hold_node:.0f}s)", functools.partial(self.node_down, hold_node)),
            ]
            self.rng.shuffle(mixed)
            if r == 0:
                mixed = [("app-sigkill(no retries)", lambda: self.kill_app(False)),
                         ("garbage-counter", self.garbage_counter),
                         ("resume --retries 3", lambda: self.note_resume("--retries", "3"))] + mixed
            steps += mixed
        if self.only:  # development: a subset (the seeded moments stay the same)
            keep = any(s[0].startswith(self.only) for s in steps if s[0].startswith("app-sigkill(no"))
            steps = [s for s in steps if s[0].startswith(self.only) or (keep and s[0].startswith("resume"))]
        return steps

    def note_resume(self, *args: str) -> None:
        out = self.chain.resume(*args)
        self.report.note(f"chain submit --resume {' '.join(args)}: {out}")

    def run(self) -> Report:
        ch = self.chain
        shutil.copy(HERE / "fault_app.py", ch.workdir / "app.py")
        ch.set_pace(self.pace)
        args = ["--backend", "slurm", "--max-iter", str(self.max_iter), "--app-cmd", "python3 app.py",
                "--checkpoint-every", "10", "--runner-time", "0:20", "--runner-margin", "6",
                "--submitter-time", "2:00", "--submitter-margin", "20", "--poll-max", "10"]
        self.report.settings = {"MAX_ITER": self.max_iter, "chain": " ".join(args[2:]), "pace": self.pace,
                                "ITER_SECONDS": ch.env["ITER_SECONDS"], "FAULT_SAVE_DELAY": ch.env["FAULT_SAVE_DELAY"],
                                "workdir": str(ch.workdir)}
        steps = self.plan()
        self.report.schedule = [name for name, _ in steps]
        if any(name.startswith(("slurm", "node")) for name, _ in steps):
            start = time.time()
            self._wait_quiet(start, 1200, lambda: None)
        out = ch.cmd("submit", *args)
        ch.chain_id = out.stdout.split()[1].rstrip(":")
        self.report.note(f"submitted chain {ch.chain_id}")
        self.sampler = Sampler(ch.chain_id)
        self.sampler.start()
        try:
            for name, step in steps:
                if ch.committed() > self.max_iter * 0.8:
                    self.report.note(f"{name}: skipped, the chain is nearly done")
                    continue
                try:
                    step()
                except FaultError as exc:
                    self.report.note(f"{name}: {exc}")
                    if not any(f["ok"] is False for f in self.report.faults[-1:]):
                        self.report.fault(name, "(aborted)", str(exc)[:400], False)
                    break
            ch.set_pace(0.01)  # the faults are done: finish quickly
            st = ch.wait_ended(600 if self.long else 240)
            time.sleep(1)
        finally:
            self.sampler.stop()
            self.restore()
        self.invariants(st)
        self.report.duration = time.time() - self.report.t0
        return self.report

    def restore(self) -> None:
        """Whatever happened, leave the cluster UP and the node IDLE."""
        self.cluster_disturbed = False
        sh(["scontrol", "update", f"nodename={self.node}", "state=resume"], timeout=20)
        up = cluster_up()
        state = node_state(self.node)
        if up.returncode != 0 or state.split("*")[0] not in ("idle", "mixed", "allocated", "completing"):
            self.report.check("cluster restored", False, f"dev-cluster up rc {up.returncode}, node {state!r}")
        else:
            self.report.check("cluster restored", True, f"all daemons up, node {state}")

    # -- invariants
    def invariants(self, st: dict[str, Any]) -> None:
        ch, rep = self.chain, self.report
        status = json.loads(ch.cmd("status", "--json").stdout)
        rep.check("chain status --json completed", status["state"] == "completed",
                  f"{status['state']} ({status['reason']})")
        counter = ch.counter()
        rep.check("final counter = MAX_ITER", counter == self.max_iter, f"counter {counter}, MAX_ITER {self.max_iter}")
        try:
            redone = IterLog.read(ch.iter_log).check_exactly_once_beyond_checkpoints(self.max_iter)
            rep.check("iterations exactly once beyond checkpoints", True,
                      f"all {self.max_iter} computed; {redone} redone after faults (all after the last checkpoint)")
        except AssertionError as exc:
            rep.check("iterations exactly once beyond checkpoints", False, str(exc)[:300])
        overlap = _app_overlap(ch.events())
        rep.check("never two apps at once (iteration log)", not overlap, overlap or "app lifetimes disjoint")
        s = self.sampler
        assert s is not None
        rep.check("never two runners / submitters in squeue", not s.violations and s.samples > 50,
                  f"{s.samples} samples ({s.failed} while squeue did not answer); "
                  + (f"violations: {s.violations[:5]}" if s.violations else "none"))
        names = [h.get("name") for h in st.get("hooks", [])]
        rep.check("hooks once each (state.json)", len(names) == len(set(names)) and "report" in names,
                  f"hooks {names}")
        log = ch.log_text()
        tail = log[log.rfind("resumed chain"):] if "resumed chain" in log else log
        final = tail.count("hook report: running")
        rep.check("one report hook after the final completion", final == 1 and "chain completed" in tail,
                  f"{final} 'hook report: running' after the last resume")


def _app_overlap(events: list[list[str]]) -> str:
    """Two app processes alive at once, from start..exit/last event per pid."""
    spans: dict[str, list[float]] = {}
    for ev in events:
        t, pid = float(ev[0]), ev[4]
        span = spans.setdefault(pid, [t, t])
        span[1] = t
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    for (p1, a), (p2, b) in itertools.pairwise(ordered):
        if b[0] < a[1]:
            return f"app pid {p2} started at {b[0]:.1f} before pid {p1} ended at {a[1]:.1f}"
    return ""


def run_suite(seed: int, scale: str = "bounded", workdir: Path | None = None,
              only: tuple[str, ...] = ()) -> Report:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
