"""Runner features end to end: module loading (Lmod), srun launch with the
stop signal forwarded, hostile values kept literal, and the three example
apps run with their README's own `chain submit` line (issues 3 and 5)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from e2e_helpers import (
    EXAMPLES,
    IterLog,
    chain_cmd,
    copy_example,
    wait_ended,
    wait_prequeued,
)
from waiting import wait_until

from chain.backends import make_backend

LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")

# A test app that only the stop signal stops (it ignores CHAIN_DEADLINE on
# purpose); SAVE_EVERY > 0 checkpoints periodically, STOP_DELAY is how long its
# checkpoint on the signal takes.
SIGNAL_APP = """\
import os, signal, sys, time
path = os.environ["CKPT_PATH"]
every, delay = int(os.environ.get("SAVE_EVERY", "0")), float(os.environ.get("STOP_DELAY", "0"))
i = int(open(path).read()) if os.path.exists(path) else 0
stop = False
def handler(sig, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, handler)
def save():
    open(path + ".tmp", "w").write(str(i)); os.replace(path + ".tmp", path)
with open("steps.log", "a") as log:
    log.write(f"start {i} step={os.environ.get('SLURM_STEP_ID', '-')}\\n")
while i < int(os.environ["MAX_ITER"]):
    if stop:
        time.sleep(delay)
        save()
        sys.exit(99)
    time.sleep(0.1)
    i += 1
    if every and i % every == 0 and not stop:  # once asked to stop, the one save is the slow one below
        save()
save()
"""


@pytest.fixture()
def modulepath(tmp_path: Path) -> str:
    if not LMOD_INIT.exists():
        pytest.fail("Lmod is not installed (scripts/setup --dev installs it)")
    mods = tmp_path / "modulefiles" / "chaintest"
    mods.mkdir(parents=True)
    (mods / "1.0.lua").write_text('setenv("CHAINTEST_LOADED", "yes")\n')
    return str(tmp_path / "modulefiles")


def test_modules_are_loaded_before_the_app(backend: str, tmp_path: Path, modulepath: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "1",
        "--modules",
        "chaintest/1.0",
        "--app-cmd",
        'echo "$CHAINTEST_LOADED" > loaded.txt; echo 1 > state_iter.txt',
        cwd=work,
        env={"MODULEPATH": modulepath},
    )
    report = wait_ended(work, timeout=90)
    assert report["state"] == "completed", report
    assert (work / "loaded.txt").read_text() == "yes\n"


def test_unknown_module_fails_the_chain_with_the_reason(backend: str, tmp_path: Path, modulepath: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "1",
        "--modules",
        "nosuchmodule/9",
        "--app-cmd",
        "echo 1 > state_iter.txt",
        cwd=work,
        env={"MODULEPATH": modulepath},
    )
    report = wait_ended(work, timeout=90)
    assert report["state"] == "failed"
    assert "module load failed: nosuchmodule/9" in report["reason"]
    assert not (work / "state_iter.txt").exists(), "the app ran although its module failed"


def test_srun_mode_forwards_the_stop_signal(slurm_cluster: object, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(SIGNAL_APP)
    chain_cmd(
        "submit",
        "--backend",
        "slurm",
        "--max-iter",
        "150",
        "--launch-mode",
        "srun",
        "--srun-args",
        "-n 1",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:15",
        "--runner-margin",
        "5",
        "--poll-max",
        "10",
        cwd=tmp_path,
    )
    report = wait_ended(tmp_path, timeout=180)
    assert report["state"] == "completed", report
    codes = [r["exit_code"] for r in report["runners"]]
    assert codes[:-1] and all(c == 124 for c in codes[:-1]), codes  # stopped by our signal, advanced
    steps = (tmp_path / "steps.log").read_text().splitlines()
    assert all("step=0" in line for line in steps), steps  # the app ran as a job step under srun


HOSTILE = 'it\'s "$(touch pwned)" `touch pwned2` ; $HOME'


def test_hostile_values_reach_the_job_literally(backend: str, tmp_path: Path) -> None:
    work = tmp_path / f"dir with {HOSTILE[:14]}"
    work.mkdir()
    ckpt = f"counter {HOSTILE}.txt"
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "3",
        "--ckpt-path",
        ckpt,
        "--chain-dir",
        f"chain {HOSTILE}",
        "--app-cmd",
        'printf %s "$CKPT_PATH" > seen.txt; echo 3 > "$CKPT_PATH"',
        cwd=work,
    )
    report = wait_ended(work, timeout=90, chain_dir=f"chain {HOSTILE}")
    assert report["state"] == "completed", report
    assert (work / "seen.txt").read_text() == ckpt
    assert (work / ckpt).read_text() == "3\n"
    for name in ("pwned", "pwned2"):
        assert not list(tmp_path.rglob(name)) and not Path(name).exists()


def _readme_command(kind: str) -> list[str]:
    lines = [l for l in (EXAMPLES / kind / "README.md").read_text().splitlines() if l.startswith("chain submit")]
    assert len(lines) >= 1, f"examples/{kind}/README.md has no line starting with 'chain submit'"
    return shlex.split(lines[0])[1:]


@pytest.mark.parametrize("kind", ["bash", "python", "r"])
def test_example_runs_as_a_chain_on_slurm(slurm_cluster: object, kind: str, tmp_path: Path) -> None:
    if kind == "r" and shutil.which("Rscript") is None:
        pytest.fail("Rscript is not installed (scripts/setup --dev installs r-base-core)")
    copy_example(kind, tmp_path)
    args = _readme_command(kind)
    max_iter = int(args[args.index("--max-iter") + 1])
    # The README's exact command; iterations of 0.4 s: two runners (~46 iterations per 20 s window).
    chain_cmd(*args, "--backend", "slurm", cwd=tmp_path, env={"ITER_SECONDS": "0.4"})
    report = wait_ended(tmp_path, timeout=300)
    assert report["state"] == "completed", (tmp_path / ".chain" / "chain.log").read_text()
    assert len(report["runners"]) >= 2
    IterLog.read(tmp_path / "iterations.log").check_exactly_once_beyond_checkpoints(max_iter)


def test_adaptive_margin_learns_the_apps_stop_time(backend: str, tmp_path: Path) -> None:
    """A 2 s margin (1.5 s of grace) is too short for a 2 s checkpoint: the
    runner kills the app; the 1.5 s it was given is a lower bound of what it
    needs, so the next margin becomes 2 x 1.5 + 5, capped so that the
    runner's start-up plus the margin leave half the 12 s runner for work
    (5 s after a start-up under a second, 3.75 s of grace): enough, and it
    never shrinks again."""
    import re

    (tmp_path / "app.py").write_text(SIGNAL_APP)
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "200",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:12",
        "--runner-margin",
        "2",
        cwd=tmp_path,
        env={"SAVE_EVERY": "10", "STOP_DELAY": "2"},
    )
    report = wait_ended(tmp_path, timeout=180)
    log = (tmp_path / ".chain" / "chain.log").read_text()
    assert report["state"] == "completed", log
    raised = re.search(
        r"runner margin 2s -> (\d+)s \(the app was killed before it finished its checkpoint; "
        r"capped at \1s: start-up (\d+\.\d)s \+ margin leave half the 12s runner for work\)",
        log,
    )
    assert raised, log
    margin = int(raised.group(1))
    assert margin in (4, 5), log  # floor(6 - start-up)
    assert log.count("runner margin") == 1 and "margin does not fit" not in log, log
    records = [
        json.loads(p.read_text())
        for p in sorted((tmp_path / ".chain" / "runners").glob("*.json"), key=lambda p: int(p.stem))
    ]
    assert len(records) >= 3
    assert [r["margin"] for r in records[:3]] == [2, margin, margin]
    assert records[0]["killed"] and not any(r["killed"] for r in records[1:])
    # within the grace the margin gives (the runner keeps a quarter of it)
    assert all(1.5 <= r["stop_to_exit"] < 0.75 * margin for r in records[1:] if r.get("stop_to_exit") is not None)


def test_fixed_margin_keeps_the_configured_one(backend: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(SIGNAL_APP)
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "150",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:12",
        "--runner-margin",
        "5",
        "--fixed-margin",
        cwd=tmp_path,
        env={"SAVE_EVERY": "10", "STOP_DELAY": "2"},
    )
    report = wait_ended(tmp_path, timeout=180)
    assert report["state"] == "completed"
    assert "runner margin" not in (tmp_path / ".chain" / "chain.log").read_text()


def test_lookahead_prequeues_the_next_runner_without_overlap(backend: str, tmp_path: Path) -> None:
    """--lookahead: runner k+1 is queued behind k while k computes, promoted
    when k's outcome says continue, never running next to k; at the end the
    last pre-queued runner is cancelled and never runs the app."""
    import subprocess

    copy_example("python", tmp_path)
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--lookahead",
        "--max-iter",
        "60",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:15",
        "--runner-margin",
        "5",
        "--poll-max",
        "10",
        cwd=tmp_path,
        env={"ITER_SECONDS": "0.4"},
    )
    chain_dir = tmp_path / ".chain"
    overlaps: list[list[str]] = []

    def sample() -> None:
        if backend == "slurm":
            out = subprocess.run(
                ["squeue", "-h", "-o", "%j|%T"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
            rows = [line.split("|") for line in out.splitlines()]
        else:
            rows = [
                [i.name, i.state.value]
                for i in make_backend("local", chain_dir).query([str(n) for n in range(1, 100)]).values()
            ]
        running = [
            n
            for n, st in rows
            if ".r" in n
            and st == "RUNNING"
            and (chain_dir / "state.json").exists()
            and n.startswith(json.loads((chain_dir / "state.json").read_text())["chain_id"])
        ]
        if len(running) > 1:
            overlaps.append(running)

    report = wait_ended(tmp_path, timeout=240, sample=sample)
    log = (chain_dir / "chain.log").read_text()
    assert report["state"] == "completed", log
    assert not overlaps, overlaps
    assert log.count("next runner: runner") >= 2, log
    # runner 2 was queued by chain submit itself, before the submitter job started
    assert log.index("next runner: runner 2 queued") < log.index("cycle 0 start"), log
    assert "next runner: cancelled the queued runner job" in log
    IterLog.read(tmp_path / "iterations.log").check_exactly_once_beyond_checkpoints(60)
    starts = IterLog.read(tmp_path / "iterations.log").starts()
    assert len(starts) == len(report["runners"]), "a pre-queued runner ran the app without being promoted"


def test_a_prequeued_runner_waits_at_most_its_patience_then_a_fresh_one_runs(backend: str, tmp_path: Path) -> None:
    """--lookahead, with the submitter frozen (SIGSTOP) while runner 1's app
    computes: runner 2, queued behind runner 1, starts when runner 1 ends and
    waits to be promoted for PROMOTION_PATIENCE (120 s), no longer, holding
    its allocation without running the app; then it leaves. Thawed, the
    submitter finds it gone and submits a fresh runner, which goes on from
    runner 1's checkpoint. Times are the scheduler's; the app's own log says
    which job ran it. (The runners' 3-minute limit outlasts the patience: a
    shorter one bounds the wait by its own end less its margin, see
    test_lookahead_short_runner.py.)"""
    from chain.jobs.runner import PROMOTION_PATIENCE

    # each run: 8 s of "compute", +10 on the counter, exit 99 (checkpointed) or 0 at MAX_ITER
    app = (
        'n=$(cat state_iter.txt 2>/dev/null || echo 0); echo "$(date +%s.%N) start $n $SLURM_JOB_ID" >> app.log; '
        'sleep 8; echo $((n + 10)) > state_iter.txt; echo "$(date +%s.%N) exit $((n + 10)) $SLURM_JOB_ID" >> app.log; '
        "[ $((n + 10)) -ge 30 ] && exit 0; exit 99"
    )
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--lookahead",
        "--max-iter",
        "30",
        "--app-cmd",
        app,
        "--runner-time",
        "3:00",
        "--runner-margin",
        "10",
        "--poll-max",
        "10",
        "--submitter-time",
        "10:00",
        cwd=tmp_path,
    )
    chain_dir = tmp_path / ".chain"
    pq = wait_prequeued(tmp_path, backend)
    sched, app_lines, finished = pq.sched, pq.app_lines, pq.finished
    first, second, submitter = pq.first, pq.second, pq.submitter
    assert app_lines()[0][1:] == ["start", "0", first]

    sched.cancel(submitter, signal="STOP")
    try:
        # runner 1 ends by itself; runner 2 starts, waits, leaves
        ran = wait_until(
            lambda: finished(second),
            PROMOTION_PATIENCE + 120,
            interval=1,
            what=f"pre-queued runner {second} to give up",
            describe=lambda: sched.query([first, second]),
        )
    finally:
        sched.cancel(submitter, signal="CONT")
    assert ran.state.value == "COMPLETED" and ran.start is not None and ran.end is not None, ran
    waited = ran.end - ran.start
    # Slurm's times are whole seconds; the runner's own start-up and exit come on top
    assert PROMOTION_PATIENCE - 1 <= waited <= PROMOTION_PATIENCE + 30, waited
    report = wait_ended(tmp_path, timeout=240)
    assert report["state"] == "completed", (chain_dir / "chain.log").read_text()
    lines = app_lines()
    jobs = [line[3] for line in lines if line[1] == "start"]
    assert second not in jobs, "the pre-queued runner ran the app without being promoted"
    assert [line[1:3] for line in lines] == [
        ["start", "0"],
        ["exit", "10"],
        ["start", "10"],
        ["exit", "20"],
        ["start", "20"],
        ["exit", "30"],
    ], lines
    fresh = jobs[1]
    assert jobs[0] == first and int(fresh) > int(second), (jobs, second)  # submitted after runner 2 gave up
    info = sched.query([fresh])[fresh]
    assert info.start is not None and info.start >= ran.end - 1, (info, ran)  # and ran once runner 2 had left
