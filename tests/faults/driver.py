"""Fault-injection suite: a long chain on the
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

The faults are methods of one ``Suite`` put together from their families:
``app_faults``, ``slurm_faults``, ``command_faults`` (on ``suite_base``'s
shared state and helpers); ``chain_view`` is the chain under test seen from
outside, ``evidence`` the proofs' sources, ``schedule`` the run and report.

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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests"))  # e2e_helpers imports waiting from there
from app_faults import AppFaults
from chain_view import ENDED
from command_faults import CommandFaults
from e2e_helpers import IterLog
from evidence import (
    LIVE_STATES,
    FaultError,
    Sampler,
    _app_overlap,
    _settled,
    cancel_leftovers,
    cluster_env,
    cluster_up,
    node_state,
    running_marker,
    sh,
    squeue_rows,
)
from schedule import Report, Step, execute, proven_check
from slurm_faults import SlurmFaults

HOOK_MARKERS = ("aggregate_usage.ran", "plot_progress.ran", "user-hook.ran")


# --------------------------------------------------------------------------- the suite
class Suite(AppFaults, SlurmFaults, CommandFaults):
    """The faults of every family, scheduled (``plan``), run against one
    chain (``run``), then the invariants."""

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
                mixed += [
                    Step("submitter-scancel", "submitter-scancel", lambda: self.kill_submitter("scancel")),
                    Step("submitter-sigkill", "submitter-kill", lambda: self.kill_submitter("kill")),
                ]
            hold_ctld, hold_dbd, hold_node = self.delay(22, 30), self.delay(15, 25), self.delay(4, 10)
            mixed += [
                Step(
                    f"slurmctld-down({hold_ctld:.0f}s)",
                    "slurmctld-down",
                    functools.partial(self.stop_slurmctld, hold_ctld),
                ),
                Step(f"node-down({hold_node:.0f}s)", "node-down", functools.partial(self.node_down, hold_node)),
            ]
            if not self.relay:  # aimed at the submitter's accounting query of its runner
                mixed.append(
                    Step(
                        f"slurmdbd-down({hold_dbd:.0f}s)",
                        "slurmdbd-down",
                        functools.partial(self.stop_slurmdbd, hold_dbd),
                    )
                )
            self.rng.shuffle(mixed)
            if r == 0:
                mixed = [
                    Step("app-sigkill(no retries)", "app-sigkill", lambda: self.kill_app(False)),
                    Step("garbage-counter", "garbage-counter", self.garbage_counter),
                    Step("resume --retries 3", "", lambda: self.note_resume("--retries", "3")),
                ] + mixed
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
                "{open('state_iter.txt').read().strip()}\\n\")\n"
            )
        return ["--hook", f'echo "$(date +%s.%N) $CHAIN_STATE $(cat state_iter.txt)" >> {HOOK_MARKERS[2]}']

    def run(self) -> Report:
        ch = self.chain
        shutil.copy(HERE / "fault_app.py", ch.workdir / "app.py")
        ch.env.update(self.calls.install())
        ch.set_pace(self.pace)
        hooks = self.setup_hooks()
        driver = (
            ["--mode", "relay"]
            if self.relay
            else ["--mode", "submitter", "--submitter-time", "2:00", "--submitter-margin", "20", "--poll-max", "10"]
        )
        args = [
            "--backend",
            "slurm",
            "--max-iter",
            str(self.max_iter),
            "--app-cmd",
            "python3 app.py",
            "--checkpoint-every",
            "10",
            "--runner-time",
            "0:20",
            "--runner-margin",
            "6",
            *driver,
            *hooks,
            *shlex.split(os.environ.get("FAULT_SUITE_CHAIN_ARGS", "")),
        ]
        self.report.settings = {
            "mode": self.mode,
            "MAX_ITER": self.max_iter,
            "chain": " ".join(args[2:]),
            "pace": self.pace,
            "ITER_SECONDS": ch.env["ITER_SECONDS"],
            "FAULT_SAVE_DELAY": ch.env["FAULT_SAVE_DELAY"],
            "workdir": str(ch.workdir),
        }
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
                self.report.note(
                    "after the failed fault no job of the chain is queued (nothing drives it): not waiting for its end"
                )
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
        rep.check(
            "chain status --json completed", status["state"] == "completed", f"{status['state']} ({status['reason']})"
        )
        counter = ch.counter()
        rep.check("final counter = MAX_ITER", counter == self.max_iter, f"counter {counter}, MAX_ITER {self.max_iter}")
        final_exit = [ev for ev in ch.events() if ev[1] == "exit"][-1:]
        rep.check(
            "the last app exited 0 at MAX_ITER (app log)",
            bool(final_exit) and final_exit[0][2] == str(self.max_iter) and final_exit[0][5:] == ["0"],
            f"last exit event {final_exit}",
        )
        try:
            redone = IterLog(_settled(ch.events())).check_exactly_once_beyond_checkpoints(self.max_iter)
            rep.check(
                "iterations exactly once beyond checkpoints",
                True,
                f"all {self.max_iter} computed; {redone} redone after faults (all after the last checkpoint)",
            )
        except AssertionError as exc:
            rep.check("iterations exactly once beyond checkpoints", False, str(exc)[:300])
        overlap = _app_overlap(ch.events())
        rep.check("never two apps at once (iteration log)", not overlap, overlap or "app lifetimes disjoint")
        s = self.s
        rep.check(
            "never a submitter, never two runners running or queued, in squeue"
            if self.relay
            else "never two runners / submitters in squeue",
            not s.violations and s.samples > 50,
            f"{s.samples} samples ({s.failed} while squeue did not answer); "
            + (f"violations: {s.violations[:5]}" if s.violations else "none"),
        )
        done_at = float(final_exit[0][0]) if final_exit else float("inf")
        for marker in HOOK_MARKERS:
            try:
                lines = (ch.workdir / marker).read_text().splitlines()
            except OSError:
                lines = []
            fields = [line.split() for line in lines]
            rep.check(
                f"hook marker {marker}: one line, at completion",
                len(fields) == 1
                and fields[0][1:] == ["completed", str(self.max_iter)]
                and float(fields[0][0]) >= done_at,
                f"{lines} (the last app exited at {done_at:.3f})",
            )
        # The report hook: its one batched accounting query (sacct without -X)
        # made by the final submitter job (relay: the last runner's) after
        # the last app exited.
        usage = [
            c for c in self.chain_calls(done_at) if c.prog == "sacct" and "-X" not in c.args.split() and c.job != "-"
        ]
        rep.check(
            "the report hook ran once after the final completion (Slurm call log)",
            len([c for c in usage if c.rc == 0]) == 1,
            f"{len(usage)} usage sacct calls after the last app exit ({[(c.job, c.rc) for c in usage]})",
        )


def run_suite(
    seed: int, scale: str = "bounded", workdir: Path | None = None, only: tuple[str, ...] = (), mode: str = "submitter"
) -> Report:
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
    parser.add_argument(
        "--mode",
        choices=("submitter", "relay"),
        default="submitter",
        help="the chain's mode (relay: the faults that apply to it)",
    )
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
