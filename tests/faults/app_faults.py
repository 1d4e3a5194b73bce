"""Faults on the app and its runner (see driver.py): SIGKILL of the app inside
chain.app's save, a garbage counter, the user's scancel of the runner,
SIGKILL of the runner's supervising process."""

from __future__ import annotations

import functools
import os
import signal
import time
from typing import Any

from chain_view import ENDED
from evidence import (
    FaultError,
    NotProven,
    _alive,
    cmdline,
    job_active,
    parent_pid,
    pid_job,
    sh,
)
from suite_base import SuiteBase

from chain.app.atomic import TMP_PREFIX

# supervisor-kill lands at least this long before the app's own deadline,
# when a chain.app app stops by itself (CHAIN_DEADLINE) even if nobody tells it
SELF_STOP = 8.0


class AppFaults(SuiteBase):
    """Faults on the app and its runner."""

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
            ok = st["state"] == "failed" and ("137" in st["reason"] or "SIGKILL" in st["reason"]) and counter == at_kill
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
            ok = (
                entry["verdict"] == "continue"
                and "retry" in entry["reason"]
                and first is not None
                and first[3] != job
                and int(first[2]) == at_kill
            )
            effect = (
                f"runner judged {entry['verdict']}: {entry['reason']!r}; next app (job "
                f"{first[3] if first else '-'}) started at {first[2] if first else '-'}; "
                f"next checkpoint {nxt} (resumed from {at_kill})"
            )
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
        last_inside = max((i for i, ev in enumerate(mine) if ev[1] == "inside" and int(ev[2]) == value), default=None)
        after = [ev[1] for ev in mine[last_inside + 1 :]] if last_inside is not None else ["?"]
        tmp = ch.workdir / f"{TMP_PREFIX}{ch.ckpt.name}.{pid}"
        try:
            tmp_text = tmp.read_text()
        except OSError:
            tmp_text = None
        counter = ch.counter_text().strip() or "0"  # no file yet (the first save): 0, as chain reads it
        landed = last_inside is not None and not after and tmp_text == f"{value}\n" and counter == str(before)
        proof = (
            f"app log of pid {pid}: 'inside {value}' then {after or 'nothing'}; chain.app's temporary "
            f"{tmp.name}: {tmp_text!r}; counter file {counter!r} (last committed {before})"
        )
        return proof, landed

    # -- 7: garbage checkpoint (on a stopped chain, then resumed)
    def garbage_counter(self) -> None:
        ch = self.chain
        real = ch.ckpt.read_text() if ch.ckpt.exists() else None  # none: the first save was killed
        ch.quiet()
        before = ch.state()
        t = time.time()
        ch.ckpt.write_text("v2 iter 10\n")
        # `chain submit --resume` reads the counter before anything is queued and refuses (exit 3)
        out = ch.cmd("submit", "--resume", check=False)
        time.sleep(2)  # a job queued by mistake would show in the call log and the app's log by now
        after = ch.state()
        started = ch.starts_after(t)
        submitted = [c for c in self.chain_calls(t) if c.submits_runner(ch.chain_id)]
        same = all(after.get(key) == before.get(key) for key in ("state", "submitter_cycle", "runner_seq"))
        ok = (
            out.returncode == 3
            and "plain integer" in out.stderr
            and not started
            and not submitted
            and same
            and ch.ckpt.read_text() == "v2 iter 10\n"
        )
        effect = (
            f"submit --resume exited {out.returncode}: {out.stderr.strip()!r}; chain still {after.get('state')}; "
            f"app started {len(started)} times; counter file left as is"
        )
        proof = (
            f"{len(submitted)} runner sbatch calls after the garbage was written; no app start in the app's "
            "log; the chain's state, submitter cycle and runner number unchanged"
        )
        if real is None:
            ch.ckpt.unlink()
        else:
            ch.ckpt.write_text(real)
        self.report.fault(
            "garbage-counter", "counter replaced by 'v2 iter 10', chain submit --resume", effect, ok, proof
        )
        if not ok:
            raise FaultError(effect)

    # -- 2: user scancel of the runner
    def scancel_runner(self) -> None:
        ch = self.chain
        delay = self.delay(0.5, 6)
        # an app with time left: a runner about to stop on its own would have
        # ended before the scancel, which then cancels nothing (CI-17's flake)
        job, pid = self.early_app(delay)
        time.sleep(delay)
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
        proof = (
            f"squeue showed runner {job} {' -> '.join(slurm) or '(nothing)'}; its app (pid {pid}) "
            f"logged its exit {app_exit - t if app_exit else float('nan'):.1f}s after the scancel"
        )
        if not ok:
            self.report.fault("scancel-runner", f"scancel {job}", effect, False, proof)
            raise FaultError(effect)
        if not landed:
            raise NotProven(proof)
        self.report.fault("scancel-runner", f"scancel {job}", effect, ok, proof)

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
            raise NotProven(
                f"app {app} of job {job}: parent {runner} ({' '.join(argv[:4])!r}, job "
                f"{pid_job(runner)}), stop signal in {stop_at - time.time():.1f}s"
            )
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
        effect = (
            f"app {app} last logged +{outlived:.1f}s after its runner died (its exit: "
            f"{' '.join(exit_ev[1:3]) + ' code ' + exit_ev[5] if exit_ev and len(exit_ev) > 5 else 'none'})"
            f"; {outcome[1]}"
        )
        proof = (
            f"pid {runner} was job {job}'s `{' '.join(argv[1:4])}` (its /proc environ), the parent of app "
            f"{app}, which logged {len(ran_before)} iterations in the 3 s before the SIGKILL; gone "
            f"{'at once' if not _alive(runner) else '?'}; squeue: {job} {' -> '.join(slurm) or '(not seen)'}"
        )
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
        return ok, (
            f"the next app (job {first[3]}) started at {first[2]} (the killed one's exit left "
            f"{at_exit}); chain {st['state']}, next checkpoint {ch.committed()}"
        )
