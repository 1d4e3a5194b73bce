"""Faults through the user's commands (see driver.py): scancel / SIGKILL of the
submitter then the documented resume, and racing commands (cancel and
resume at once, then two resumes at once)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from chain_view import ENDED
from evidence import (
    FaultError,
    NotProven,
    job_active,
    sh,
)
from suite_base import SuiteBase

# what `chain submit --resume` says when a `chain cancel` is under way (chain.api.submission)
CANCEL_MARK_REFUSAL = "is being cancelled"


class CommandFaults(SuiteBase):
    """Faults through the user's commands."""

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
        new_subs = ch.wait(
            "a new submitter job in squeue", lambda: [j for j in self.s.jobs_named("s", t_resume) if j != sub], 60
        )
        new = new_subs[0]
        nxt = self.progress_after(before, 120)
        app_exit = ch.wait(f"runner {runner}'s app (pid {app_pid}) to exit", lambda: ch.app_exit(app_pid), 120)
        # Evidence (squeue samples, the Slurm call log, the app's log):
        together = self.s.together(new, {"RUNNING"}, runner, {"RUNNING"})
        calls = self.chain_calls(t_resume)
        looked = [c for c in calls if c.job == new and c.names(runner)]
        early = [c for c in calls if c.submits_runner(ch.chain_id) and c.start < app_exit]
        app_iters_after = [
            ev
            for ev in ch.events()
            if int(ev[4]) == app_pid and ev[1] == "iter" and together is not None and float(ev[0]) > together
        ]
        # a new submitter that only started after the runner had ended judges
        # it from its record, without asking Slurm: a timing miss, not a failure
        ok = not early and (bool(looked) or together is None)
        effect = (
            f"submitter {sub} {'/'.join(killed_sub)}; resumed ({resumed}): new submitter {new}; next checkpoint {nxt}"
        )
        proof = (
            f"squeue: new submitter {new} RUNNING beside live runner {runner} "
            + (f"at +{together - t_resume:.1f}s" if together else "never (runner ended first)")
            + f"; {new} asked Slurm about {runner} {len(looked)} times"
            + (f" (first: {looked[0].prog} at +{looked[0].start - t_resume:.1f}s)" if looked else "")
        )
        proof += (
            f"; runner sbatch calls before the adopted runner's app exited (+{app_exit - t_resume:.1f}s): "
            f"{len(early)}; the adopted app logged {len(app_iters_after)} iterations after that"
        )
        name = f"submitter-{how}"
        if not ok:
            self.report.fault(name, " ".join(argv) + f" (runner {runner} running)", effect, False, proof)
            raise FaultError(f"the new submitter did not adopt the live runner: {proof}")
        if together is None or not app_iters_after:
            raise NotProven(proof)
        self.report.fault(name, " ".join(argv) + f" (runner {runner} running)", effect, ok, proof)

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
            proc = subprocess.Popen(
                [sys.executable, "-m", "chain", *args],
                cwd=self.chain.workdir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
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
        first = {
            tag: min((c.start for c in calls if c.job == "-" and c.who == tag and c.start >= t), default=None)
            for tag, t, *_ in raced
        }
        gap = abs(raced[0][1] - raced[1][1])
        overlap = min(r[2] for r in raced) - max(r[1] for r in raced)
        order = sorted((t, tag) for tag, t in first.items() if t is not None)
        marked = [
            tag for tag, _, _, rc, last in raced if rc != 0 and first[tag] is None and CANCEL_MARK_REFUSAL in last
        ]
        landed = gap < 0.05 and overlap > 0 and len(order) + len(marked) == 2
        proof = (
            f"started {gap * 1000:.0f} ms apart, ran together {overlap:.1f}s; first Slurm call of each: "
            + ", ".join(f"{tag} +{t - raced[0][1]:.2f}s" for t, tag in order)
            + f" ({len(order)} of 2 reached Slurm"
            + (f"; refused on the cancel's mark: {', '.join(marked)})" if marked else ")")
        )
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
        ok = (
            a[0][3] == 0
            and consistent[0]
            and len(winners) == (1 if ended else 0)
            and len(drivers) == len(winners)
            and later[0]
        )
        effect = (
            f"cancel|resume: {[(r[0], r[3], r[4][:90]) for r in a]}; then {consistent[1]}; "
            f"resume|resume: {[(r[0], r[3], r[4][:90]) for r in b]}; new drivers queued by "
            f"{sorted(drivers) or 'none'}; then {later[1]}; next checkpoint {nxt}"
        )
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
        return {
            c.who
            for c in self.chain_calls(since)
            if c.job == "-" and c.prog == "sbatch" and c.rc == 0 and f"--job-name={self.chain.chain_id}{kind}" in c.args
        }

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
