"""The fault suite's evidence, none of it written by chain: squeue samples
(Sampler), Slurm's own answers (scontrol, sinfo), a log of every Slurm client
call chain makes (SlurmCalls, a shim on the chain's PATH) and the app's own
iteration log (``_settled``, ``_app_overlap``). Used by driver.py."""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
RUN_DIR = Path(os.environ.get("CHAIN_DEV_CLUSTER_DIR", "/var/lib/chain-dev-cluster")) / "run"
LIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
}
# A successor submitter pending on its predecessor is by design: count RUNNING ones.
SUBMITTER_LIVE = {"RUNNING", "COMPLETING", "CONFIGURING"}
# Relay: the running runner and its successor queued behind it are by design;
# a runner COMPLETING while its successor starts has ended (afterany is met).
RUNNER_RUNNING = {"RUNNING", "CONFIGURING"}
SLURM_CLIENTS = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "srun")


class FaultError(AssertionError):
    """A fault's effect is wrong: the run fails."""


class NotProven(Exception):
    """The fault was injected but it could not be shown to have landed where
    it was aimed (a timing miss): it is tried again."""


# --------------------------------------------------------------------------- shell
def sh(argv: list[str], timeout: float = 30, check: bool = False) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
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
            name, _, value = line[len("export ") :].partition("=")
            os.environ[name] = value.strip().strip("'\"")


def cluster_up() -> subprocess.CompletedProcess[str]:
    return sh(["bash", str(DEV_CLUSTER), "up"], timeout=300)


def running_marker() -> Path:
    """The file that says a fault suite disturbs *this* cluster. /tmp is
    shared with scripts/in-debian's roots, so a root's cluster (its own
    ports) gets its own name: the host's benchmarks and tests read the plain
    one, and must neither see nor lose it because of a root's suite."""
    base = os.environ.get("CHAIN_DEV_CLUSTER_PORT_BASE", "6817")
    return Path("/tmp/FAULT_SUITE_RUNNING" + ("" if base == "6817" else f".port{base}"))


def pid_job(pid: int) -> str | None:
    """The Slurm job a process belongs to (its SLURM_JOB_ID), None when it
    cannot be read: processes are told apart by job id, never by name (the
    host's and a root's jobs share one process namespace)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"SLURM_JOB_ID="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


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


def job_restarts(job_id: str) -> int | None:
    """Slurm's own count of the job's requeues (scontrol), None when unknown."""
    out = sh(["scontrol", "-o", "show", "job", job_id], timeout=15).stdout
    for word in out.split():
        if word.startswith("Restarts="):
            try:
                return int(word.split("=", 1)[1])
            except ValueError:
                return None
    return None


# --------------------------------------------------------------------------- Slurm call log
@dataclass(frozen=True)
class Call:
    """One Slurm client call made by chain (the shim's record of it)."""

    start: float
    end: float
    rc: int
    job: str  # SLURM_JOB_ID of the caller ("-" on the login side)
    prog: str
    args: str
    err: str
    who: str = "-"  # FAULT_CALLER of the caller: which of the driver's racing commands made it

    def names(self, job_id: str) -> bool:
        """The call asks about (or acts on) this job id."""
        words = self.args.replace("=", " ").replace(",", " ").split()
        return job_id in words

    def submits_runner(self, chain_id: str) -> bool:
        return self.prog == "sbatch" and f"--job-name={chain_id}.r" in self.args


class SlurmCalls:
    """A shim in front of the Slurm clients on the chain's PATH: it runs the
    real client (same arguments, output and exit code) and appends one line
    per call to ``log``. chain never writes this file."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "slurm-shim"
        self.log = base / "slurm-calls.log"
        # While ``gate`` exists, an sbatch made from inside a job waits (at
        # most 30 s) before it runs, and says so in ``held``: the driver
        # stops slurmctld exactly under a relay runner's sbatch of its
        # successor (a window of milliseconds otherwise). The call itself is
        # unchanged, only later.
        self.gate = base / "sbatch-gate"
        self.held = base / "sbatch-held"

    def install(self) -> dict[str, str]:
        """Write the shims; the environment that puts them first on PATH."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        for prog in SLURM_CLIENTS:
            real = shutil.which(prog)
            if real is None:
                continue
            script = self.dir / prog
            script.write_text(
                "#!/bin/bash\n"
                f"# fault-suite shim: runs {real}, logs the call to {self.log}\n"
                # chain calls sbatch without the SLURM_* variables (its job's
                # settings must not leak into the next job): the caller's job
                # is then its parent's
                "job=${SLURM_JOB_ID:-}\n"
                "[ -n \"$job\" ] || job=$(tr '\\0' '\\n' < /proc/$PPID/environ 2>/dev/null"
                " | sed -n 's/^SLURM_JOB_ID=//p' | head -n 1)\n"
                "job=${job:--}\n"
                + (
                    f'if [ "$job" != - ] && [ -e {shlex.quote(str(self.gate))} ]; then\n'
                    f'    printf \'%s %s\\n\' "$job" "$*" >> {shlex.quote(str(self.held))}\n'
                    "    for _ in $(seq 300); do\n"
                    f"        [ -e {shlex.quote(str(self.gate))} ] || break\n"
                    "        sleep 0.1\n"
                    "    done\n"
                    "fi\n"
                    if prog == "sbatch"
                    else ""
                )
                + "start=$(date +%s.%N)\n"
                "exec 3>&1\n"
                f'err=$({shlex.quote(real)} "$@" 2>&1 1>&3)\n'
                "rc=$?\n"
                "exec 3>&-\n"
                'if [ -n "$err" ]; then printf \'%s\\n\' "$err" >&2; fi\n'
                'printf \'%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n\' "$start" "$(date +%s.%N)" "$rc" '
                f'"$job" {prog} "$*" "$(printf \'%s\' "$err" | tr \'\\n\\t\' \'  \' | cut -c1-300)" '
                '"${FAULT_CALLER:--}" '
                f">> {shlex.quote(str(self.log))}\n"
                "exit $rc\n"
            )
            script.chmod(0o755)
        return {"PATH": f"{self.dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def calls(self) -> list[Call]:
        out = []
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        for line in lines:
            f = line.split("\t")
            if len(f) != 8:
                continue
            try:
                out.append(Call(float(f[0]), float(f[1]), int(f[2]), f[3], f[4], f[5], f[6], f[7]))
            except ValueError:
                continue
        return out


# --------------------------------------------------------------------------- sampler
class Sampler(threading.Thread):
    """squeue every ~0.5 s: never two runners of the chain pending/running,
    never two submitters running (relay: never a submitter, never two runners
    running, never two queued); and each of the chain's jobs' state history
    (Slurm's, as squeue shows it)."""

    def __init__(self, chain_id: str, interval: float = 0.5, relay: bool = False) -> None:
        super().__init__(daemon=True)
        self.chain_id = chain_id
        self.relay = relay
        self.interval = interval
        self.samples = 0
        self.failed = 0
        self.violations: list[str] = []
        self.foreign: set[str] = set()
        # job id -> [(time, name, state)] at every change
        self.history: dict[str, list[tuple[float, str, str]]] = {}
        # (time, {job id: (name, state)}) of the chain's jobs, every sample
        self.snapshots: list[tuple[float, dict[str, tuple[str, str]]]] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            rows = squeue_rows()
            if rows is None:
                self.failed += 1
            else:
                self.samples += 1
                self._judge(time.time(), rows)
            self._halt.wait(self.interval)

    def _judge(self, now: float, rows: list[tuple[str, str, str]]) -> None:
        prefix = self.chain_id + "."
        runners, submitters = [], []
        mine: dict[str, tuple[str, str]] = {}
        for job, name, state in rows:
            if not name.startswith(prefix):
                if state in LIVE_STATES:
                    self.foreign.add(name)
                continue
            mine[job] = (name, state)
            kind = name[len(prefix) :]
            if kind.startswith("r") and state in LIVE_STATES:
                runners.append(f"{job}:{name}:{state}")
            elif kind.startswith("s") and (state in SUBMITTER_LIVE or (self.relay and state in LIVE_STATES)):
                submitters.append(f"{job}:{name}:{state}")
        with self._lock:
            for job, (name, state) in mine.items():
                hist = self.history.setdefault(job, [])
                if not hist or hist[-1][2] != state:
                    hist.append((now, name, state))
            self.snapshots.append((now, mine))
        if self._violates(runners, submitters):
            self.violations.append(f"{time.strftime('%H:%M:%S')} runners={runners} submitters={submitters}")

    def _violates(self, runners: list[str], submitters: list[str]) -> bool:
        if not self.relay:
            return len(runners) > 1 or len(submitters) > 1
        # relay: one runner running and one queued behind it (both queued
        # before the first starts); a third, or two running, is a duplicate
        states = [r.rsplit(":", 1)[1] for r in runners]
        running = [s for s in states if s in RUNNER_RUNNING]
        active = [s for s in states if s != "COMPLETING"]
        return bool(submitters) or len(running) > 1 or len(active) > 2

    def states(self, job_id: str, since: float = 0.0) -> list[str]:
        with self._lock:
            return [s for t, _, s in self.history.get(job_id, []) if t >= since]

    def jobs_named(self, kind: str, since: float = 0.0) -> list[str]:
        """Ids of the chain's jobs whose name is <chain>.<kind>..., first seen at or after ``since``."""
        prefix = f"{self.chain_id}.{kind}"
        with self._lock:
            return [j for j, h in self.history.items() if h[0][1].startswith(prefix) and h[0][0] >= since]

    def together(self, a: str, state_a: set[str], b: str, state_b: set[str]) -> float | None:
        """First sample time where job a was in state_a and job b in state_b."""
        with self._lock:
            for t, mine in self.snapshots:
                if mine.get(a, ("", ""))[1] in state_a and mine.get(b, ("", ""))[1] in state_b:
                    return t
        return None

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def job_active(job_id: str) -> bool:
    proc = sh(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"], timeout=15)
    return proc.returncode == 0 and proc.stdout.strip() in LIVE_STATES


def cancel_leftovers(chain_id: str) -> None:
    """scancel every job of the chain still in the queue (by its name prefix)."""
    if not chain_id:
        return
    for job, name, state in squeue_rows() or []:
        if name.startswith(chain_id + ".") and state in LIVE_STATES:
            sh(["scancel", job], timeout=30)


def _settled(events: list[list[str]]) -> list[tuple[float, str, int, str]]:
    """The app log as IterLog reads it, with one repair: an app killed inside
    chain.app's save after the rename (it logged ``inside v``, never ``ckpt
    v``, and the next app started at v) did commit v; only its log line is
    missing."""
    out: list[tuple[float, str, int, str]] = []
    pending: dict[str, tuple[float, int, str]] = {}  # pid -> its last unfinished save
    for ev in events:
        t, kind, value, job, pid = float(ev[0]), ev[1], int(ev[2]), ev[3], ev[4]
        if kind == "inside":
            pending[pid] = (t, value, job)
        elif kind in ("ckpt", "exit"):
            pending.pop(pid, None)
        elif kind == "start":
            lost = [p for p, (_, v, _) in pending.items() if v == value]
            for p in lost:
                st, v, j = pending.pop(p)
                out.append((st, "ckpt", v, j))
            pending.clear()
        if kind in ("start", "iter", "ckpt", "exit"):
            out.append((t, kind, value, job))
    return out


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
