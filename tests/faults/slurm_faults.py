"""Faults on Slurm itself (see driver.py): slurmctld stopped (in relay mode
under a runner's sbatch of its successor), slurmdbd stopped while a runner
is judged, the node set DOWN and back."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from chain_view import ENDED
from evidence import (
    Call,
    FaultError,
    NotProven,
    _alive,
    cluster_up,
    daemon_pid,
    job_restarts,
    node_state,
    sh,
    squeue_rows,
)
from suite_base import SuiteBase


class SlurmFaults(SuiteBase):
    """Faults on Slurm's daemons and node."""

    # -- 4/5: a daemon stopped and restarted (the one skeleton of both outages)
    def _outage(
        self,
        daemon: str,
        hold: float,
        proven: Callable[[float], bool],
        longest: float,
        on_down: Callable[[], None] = lambda: None,
    ) -> tuple[int, float, float]:
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
        proof = f"{len(refused)} Slurm calls of the chain's jobs refused while slurmctld was down" + (
            f", e.g. job {refused[0].job}: {refused[0].prog} rc {refused[0].rc}: {refused[0].err[:100]!r}"
            if refused
            else ""
        )
        if not ok:
            self.report.fault("slurmctld-down", f"SIGTERM slurmctld (pid {pid})", effect, False, proof)
            raise FaultError(effect)
        if not refused:
            raise NotProven(proof)
        self.report.fault(
            "slurmctld-down", f"SIGTERM slurmctld (pid {pid}), restarted by dev-cluster up", effect, ok, proof
        )

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
            return [
                c
                for c in self.chain_calls(stopped, until)
                if c.prog == "sbatch" and c.job == job and f"--job-name={name}" in c.args and c.rc != 0
            ]

        pid, stopped, restarting = self._outage(
            "slurmctld",
            hold,
            lambda t: bool(refused(t)),
            hold + 60,
            on_down=lambda: self.calls.gate.unlink(missing_ok=True),
        )

        def settled() -> bool:  # chain's retries (relay.SUBMIT_PATIENCE, 300 s) succeed, or give up
            return any(
                c.rc == 0 for c in self.chain_calls(stopped) if c.prog == "sbatch" and f"--job-name={name}" in c.args
            ) or bool(ch.state().get("relay_broken"))

        ch.wait(f"the sbatch of {name} to go through (or the relay to break)", settled, 330, interval=0.5)
        nxt = self.progress_after(before, 240)
        st = ch.state()
        mine = [c for c in self.chain_calls(stopped) if c.prog == "sbatch" and f"--job-name={name}" in c.args]
        failed = refused(stopped, restarting)
        good = [c for c in mine if c.rc == 0]
        queued = sorted({j for j, n, _ in squeue_rows() or [] if n == name})
        ok = st["state"] == "running" and len(good) == 1 and not st.get("relay_broken") and len(queued) <= 1
        effect = (
            f"held {restarting - stopped:.0f}s; chain {st['state']}, relay_broken "
            f"{st.get('relay_broken') or 'no'}; {len(good)} successful sbatch of {name} (job ids in the "
            f"queue named so: {queued}); next checkpoint {nxt}"
        )
        proof = (
            f"runner {job}'s sbatch of its successor {name} ran {len(failed)} times refused while slurmctld "
            f"was down"
            + (f" (first +{failed[0].start - stopped:.1f}s into it: {failed[0].err[:100]!r})" if failed else "")
            + (f", then rc 0 +{good[0].start - restarting:.1f}s after the restart" if good else "")
        )
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
        # hold at least `hold`; longer (up to 90 s) until the next app has started
        pid, stopped, restarting = self._outage("slurmdbd", hold, lambda t: bool(ch.starts_after(t)), 90)
        st = ch.state()
        nxt = self.progress_after(before, 180)
        # the submitter's calls about the runner while slurmdbd was down: it
        # asks accounting first (no slurmctld RPC), which refuses; the runner
        # that recorded its end is then judged from slurmctld and its record
        asked = [c for c in self.chain_calls(stopped, restarting) if c.job != "-" and c.names(runner)]
        sacct = [c for c in asked if c.prog == "sacct"]
        app_exit = ch.app_exit(app_pid)
        # answered after its app had exited: the judgment, not a poll while it ran
        judging = [c for c in asked if c.prog != "sacct" and c.rc == 0 and app_exit is not None and c.start >= app_exit]
        nxt_start = ch.starts_after(stopped)
        next_in_window = [ev for ev in nxt_start if float(ev[0]) < restarting and ev[3] != runner]
        # accounting's refusals never stop the chain: the judgment and the next runner come without it
        ok = st["state"] == "running" and bool(nxt_start) and int(nxt_start[0][2]) >= before
        effect = (
            f"held {restarting - stopped:.0f}s; chain stayed {st['state']}; next app (job "
            f"{nxt_start[0][3] if nxt_start else '-'}) started at {nxt_start[0][2] if nxt_start else '-'}; "
            f"next checkpoint {nxt}"
        )
        proof = (
            f"runner {runner}'s app exited "
            + (f"+{app_exit - stopped:.1f}s into the outage" if app_exit else "(no exit logged)")
            + f"; while slurmdbd was down the submitter asked Slurm about {runner} "
            f"{len(asked)} times ({', '.join(sorted({c.prog for c in asked})) or 'never'}; sacct "
            f"{len(sacct)}, refused {sum(c.rc != 0 for c in sacct)}; answered after its app's exit "
            f"{len(judging)}); the next runner's app started inside "
            f"the outage: {bool(next_in_window)}"
        )
        if not ok:
            self.report.fault("slurmdbd-down", f"SIGTERM slurmdbd (pid {pid})", effect, False, proof)
            raise FaultError(effect)
        if not judging or not next_in_window:
            raise NotProven(proof)
        self.report.fault(
            "slurmdbd-down",
            f"SIGTERM slurmdbd (pid {pid}) while runner {runner} ended, restarted by dev-cluster up",
            effect,
            ok,
            proof,
        )

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
                later = [int(ev[2]) for ev in evs[new_starts[0] :] if ev[1] == "ckpt"]
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
        effect = (
            f"chain {st['state']} {st['reason']!r}, not resumed by the driver; first checkpoint of an app "
            f"started after it: {nxt}"
        )
        proof = "; ".join(
            f"{kind} {j}: {before_states[j]} -> {' -> '.join(after[j]) or '(not seen)'}, Restarts={restarts[j]}"
            for kind, j in kinds
        )
        injected = (
            f"scontrol update nodename={self.node} state=down for {hold:.0f}s ("
            + ", ".join(f"{kind} {j}" for kind, j in kinds)
            + ")"
        )
        if not ok:
            self.report.fault("node-down", injected, effect, False, proof)
            raise FaultError(f"{effect}; {proof}")
        if not all(requeued.values()):
            self.report.fault("node-down", injected, effect, False, proof)
            raise FaultError(f"jobs were not requeued: {proof}")
        self.report.fault("node-down", injected, effect, ok, proof)
