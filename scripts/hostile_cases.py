"""The cases of ``scripts/hostile-check`` (the hostile acceptance run):
each names a command, how a copy of a completed chain is spoilt before it
runs, and the exit codes that count as handled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PY = sys.executable

HUGE = "9" * 5000  # past Python's 4300-digit int() limit
DEEP = 100_000  # nesting depth of a deep document
SUBMIT = ["submit", "--backend", "local", "--max-iter", "3", "--runner-time", "0:15", "--runner-margin", "5"]
Arg = str | bytes


@dataclass
class Case:
    name: str
    argv: Sequence[Arg]
    setup: Callable[[Path], None] = lambda case: None
    codes: frozenset[int] = frozenset({2})
    env: dict[str, str] = field(default_factory=dict)
    fresh: bool = False  # no chain directory: a new submit
    check: Callable[[Path, subprocess.CompletedProcess[bytes]], str] | None = None


# --- spoiling a copy of the chain ---------------------------------------------------------------


def chain_dir(case: Path) -> Path:
    return case / "work" / ".chain"


def _at(case: Path, rel: str) -> Path:
    """``rel`` in the chain directory, or in ``work/`` (the app's side) when it starts with ``../``."""
    return case / "work" / rel[3:] if rel.startswith("../") else chain_dir(case) / rel


def victim(case: Path) -> Path:
    return case / "outside" / "victim"


def edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def state(**changes: object) -> Callable[[Path], None]:
    return lambda case: edit_json(chain_dir(case) / "state.json", **changes)


RUNNING = {"state": "running", "reason": "", "runner_live": True}
STOPPED = {"state": "failed", "reason": "app exited 3", "runner_live": False}


def then(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def run(case: Path) -> None:
        for step in steps:
            step(case)

    return run


def _replace(where: Path) -> None:
    if where.is_dir() and not where.is_symlink():
        shutil.rmtree(where)
    where.unlink(missing_ok=True)
    where.parent.mkdir(parents=True, exist_ok=True)


def link(rel: str, to: str = "victim") -> Callable[[Path], None]:
    """``rel`` (in the chain directory, or ``work/`` when it starts with ``../``)
    made a link to ``outside/<to>`` (``/dev/zero`` when ``to`` is absolute)."""

    def run(case: Path) -> None:
        where = _at(case, rel)
        _replace(where)
        where.symlink_to(to if to.startswith("/") else case / "outside" / to)

    return run


def fifo(rel: str) -> Callable[[Path], None]:
    def run(case: Path) -> None:
        where = _at(case, rel)
        _replace(where)
        os.mkfifo(where)

    return run


def text(rel: str, content: str) -> Callable[[Path], None]:
    def run(case: Path) -> None:
        where = _at(case, rel)
        _replace(where)
        where.write_text(content)

    return run


def raw(rel: str, key: str, value: str) -> Callable[[Path], None]:
    """A JSON file's ``key`` given ``value`` as written (a number json.dumps would not write)."""

    def run(case: Path) -> None:
        where = _at(case, rel)
        data = json.loads(where.read_text())
        data[key] = "@@"
        where.write_text(json.dumps(data).replace('"@@"', value))

    return run


def deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def runners_line(line: str) -> Callable[[Path], None]:
    def run(case: Path) -> None:
        with open(chain_dir(case) / "runners.jsonl", "a") as fh:
            fh.write(line + "\n")

    return run


def settings(**changes: object) -> Callable[[Path], None]:
    return lambda case: edit_json(chain_dir(case) / "settings.json", **changes)


def job_record(**changes: object) -> Callable[[Path], None]:
    """The runner's local job record (job 1) made a live job's."""
    return lambda case: edit_json(chain_dir(case) / "local-jobs" / "jobs" / "1.json", **changes)


# --- the cases ----------------------------------------------------------------------------------


def _writes() -> list[Case]:
    """A link in .chain/ for each kind of file chain writes: the target (outside/victim) stays."""
    cancel, report, resume = ["cancel"], ["report"], ["submit", "--resume", "--wait"]
    live = state(**RUNNING)
    stopped = state(**STOPPED)
    kinds: list[tuple[str, Sequence[str], Callable[[Path], None]]] = [
        ("state.json", cancel, live),
        ("chain.log", cancel, live),
        ("cancel-requested", cancel, live),
        ("runners.jsonl", cancel, live),
        ("report/usage.csv", report, stopped),
        ("report/summary.json", report, stopped),
        ("report/progress.png", report, stopped),
        ("settings.json", resume, stopped),
        ("submitter_ids.txt", resume, stopped),
        ("worker_ids.txt", resume, stopped),
        ("local-jobs/counter", resume, stopped),
        ("runners/1.json", report, stopped),
    ]
    cases = [
        Case(f"link {rel} ({argv[0]})", argv, then(prep, link(rel)), frozenset({0, 1, 2})) for rel, argv, prep in kinds
    ]
    for rel, argv in [
        ("report", report),
        ("scripts", resume),
        ("logs", resume),
        ("runners", resume),
        ("local-jobs", resume),
        ("local-jobs/jobs", resume),
    ]:
        cases.append(
            Case(f"link {rel}/ ({argv[0]})", argv, then(state(**STOPPED), link(rel, "dir")), frozenset({0, 1, 2}))
        )
    cases.append(
        Case("link logs/runner-1.out (logs)", ["logs"], link("logs/runner-1.out", "/etc/passwd"), frozenset({2}))
    )
    return cases


def _log_not_read(case: Path, done: subprocess.CompletedProcess[bytes]) -> str:
    """The report is made from chain's own records, and says the app's iteration log was not read."""
    return "" if b"iteration log not read" in done.stdout else "the report does not say the iteration log was not read"


def _reads() -> list[Case]:
    """A FIFO and a link to /dev/zero for each kind of file chain reads."""
    status, report, live = ["status"], ["report"], state(**RUNNING)
    kinds: list[tuple[str, Sequence[str], Callable[[Path], None], frozenset[int]]] = [
        ("state.json", status, lambda c: None, frozenset({2})),
        ("settings.json", status, lambda c: None, frozenset({0, 2})),
        ("runners.jsonl", status, lambda c: None, frozenset({0, 2})),
        ("chain.log", status, lambda c: None, frozenset({0, 2})),
        ("worker_ids.txt", report, lambda c: None, frozenset({0, 2})),
        ("submitter_ids.txt", ["cancel"], live, frozenset({0, 1, 2})),
        ("runners/1.json", report, lambda c: None, frozenset({0, 2})),
        ("logs/runner-1.out", ["logs"], lambda c: None, frozenset({2})),
        ("local-jobs/jobs/1.json", status, live, frozenset({0, 2})),
        ("local-jobs/counter", ["submit", "--resume", "--wait"], state(**STOPPED), frozenset({0, 2})),
        ("../state_iter.txt", status, lambda c: None, frozenset({0, 3})),
        ("../iterations.log", report, lambda c: None, frozenset({0, 2})),
    ]
    cases = []
    for rel, argv, prep, codes in kinds:
        said = _log_not_read if rel == "../iterations.log" else None
        cases.append(Case(f"fifo {rel} ({argv[0]})", argv, then(prep, fifo(rel)), codes, check=said))
        cases.append(Case(f"/dev/zero {rel} ({argv[0]})", argv, then(prep, link(rel, "/dev/zero")), codes, check=said))
    json_counter = settings(counter_cmd="json:ck.json:step")
    cases.append(
        Case("fifo json: counter (status)", ["status"], then(json_counter, fifo("../ck.json")), frozenset({0, 3}))
    )
    cases.append(
        Case(
            "/dev/zero json: counter (status)",
            ["status"],
            then(json_counter, link("../ck.json", "/dev/zero")),
            frozenset({0, 3}),
        )
    )
    cases.append(
        Case(
            "fifo --config (render)",
            ["render", "--config", "chain.toml", *SUBMIT[1:], "--app-cmd", "true"],
            fifo("../chain.toml"),
            fresh=True,
        )
    )
    cases.append(
        Case(
            "/dev/zero --config (render)",
            ["render", "--config", "/dev/zero", *SUBMIT[1:], "--app-cmd", "true"],
            fresh=True,
        )
    )
    return cases


def _numbers() -> list[Case]:
    """A number past every bound, from each source."""
    render = ["render", *SUBMIT[1:], "--app-cmd", "true"]
    no_max = [a for a in render if a not in ("--max-iter", "3")]
    stopped = state(**STOPPED)
    return [
        Case("huge --max-iter (render)", [*no_max, "--max-iter", HUGE], fresh=True),
        Case("huge MAX_ITER env (render)", no_max, env={"MAX_ITER": HUGE}, fresh=True),
        Case(
            "huge max_iter in TOML (render)",
            [*no_max, "--config", "chain.toml"],
            text("../chain.toml", f"max_iter = {HUGE}\n"),
            fresh=True,
        ),
        Case("huge counter file (status)", ["status"], text("../state_iter.txt", HUGE), frozenset({0, 3})),
        Case("huge counter file (report)", ["report"], text("../state_iter.txt", HUGE), frozenset({0, 2, 3})),
        Case("huge state.json iteration (status)", ["status"], raw("state.json", "iteration", HUGE)),
        Case("huge settings.json max_iter (status)", ["status"], raw("settings.json", "max_iter", HUGE)),
        Case("huge runners.jsonl line (status)", ["status"], runners_line(f'{{"seq": {HUGE}}}'), frozenset({0})),
        Case(
            "runners.jsonl start 1e300 (report)", ["report"], runners_line('{"seq": 2, "start": 1e300}'), frozenset({0})
        ),
        Case("huge runner record (report)", ["report"], raw("runners/1.json", "iter_after", HUGE), frozenset({0, 2})),
        Case(
            "huge local-jobs/counter (resume)",
            ["submit", "--resume", "--wait"],
            then(stopped, text("local-jobs/counter", HUGE)),
            frozenset({0}),
        ),
        Case(
            "huge local job record pid (status)",
            ["status"],
            then(state(**RUNNING), raw("local-jobs/jobs/1.json", "batch_pid", HUGE)),
        ),
        Case(
            "huge --counter-cmd output (submit --wait)",
            [*SUBMIT, "--app-cmd", "true", "--counter-cmd", "python3 -c 'print(\"9\" * 5000)'", "--wait"],
            fresh=True,
            codes=frozenset({3, 10, 11}),
        ),
    ]


def _nesting() -> list[Case]:
    stopped = state(**STOPPED)
    return [
        Case(
            "deep TOML (render)",
            ["render", "--config", "chain.toml", *SUBMIT[1:], "--app-cmd", "true"],
            text("../chain.toml", f"a = {deep_json()}\n"),
            fresh=True,
        ),
        Case("deep state.json (status)", ["status"], text("state.json", deep_json())),
        Case("deep settings.json (status)", ["status"], text("settings.json", deep_json()), frozenset({0, 2})),
        Case(
            "deep runner record (report)",
            ["report"],
            then(stopped, text("runners/1.json", deep_json())),
            frozenset({0, 2}),
        ),
        Case("deep runners.jsonl line (status)", ["status"], runners_line(deep_json()), frozenset({0})),
        Case(
            "deep json: counter (status)",
            ["status"],
            then(settings(counter_cmd="json:ck.json:step"), text("../ck.json", deep_json())),
            frozenset({0, 3}),
        ),
        Case(
            "deep local job record (status)",
            ["status"],
            then(state(**RUNNING), text("local-jobs/jobs/1.json", deep_json())),
        ),
    ]


def _no_escape(case: Path, done: subprocess.CompletedProcess[bytes]) -> str:
    shown = done.stdout + done.stderr
    return "printed a control character from disk" if b"\x1b" in shown or b"\x07" in shown else ""


def _texts() -> list[Case]:
    """Each text rule, through the flag a user types (the submit must refuse before any job)."""
    flags: list[tuple[str, Sequence[Arg]]] = [
        ("U+2028 in --partition", ["--partition", "a\u2028b"]),
        ("U+0085 in --account", ["--account", "a\u0085b"]),
        ("U+2029 in --constraint", ["--constraint", "x\u2029y"]),
        ("ESC ]52 in --qos", ["--qos", "q\x1b]52;c;aGk=\x07"]),
        ("newline in --runner-sbatch-args", ["--runner-sbatch-args", "--x\n#SBATCH --y"]),
        ("proj/run1 --job-name", ["--job-name", "proj/run1"]),
        (". --job-name", ["--job-name", "."]),
        (".. --job-name", ["--job-name", ".."]),
        ("non-UTF-8 --hook", ["--hook", b"echo \xff\xfe"]),
        ("BEL in --notify", ["--notify", "echo \x07"]),
    ]
    cases = [Case(f"{name} (submit)", [*SUBMIT, "--app-cmd", "true", *flag], fresh=True) for name, flag in flags]
    big = text("../chain.toml", f'app_cmd = "{"x" * 200_000}"\n')  # one exec argument holds at most 128 KiB
    cases.append(Case("200 KB app_cmd in TOML (submit)", [*SUBMIT, "--config", "chain.toml"], big, fresh=True))
    osc = state(reason="boom \x1b]52;c;aGk=\x07 \u2028 end")
    cases.append(Case("OSC 52 in a reason (status)", ["status"], osc, frozenset({0}), check=_no_escape))
    cases.append(Case("OSC 52 in a reason (list)", ["list", "."], osc, frozenset({0}), check=_no_escape))
    return cases


def _bait(decoy: subprocess.Popen[bytes]) -> list[Case]:
    """Local job records naming processes chain did not start: none is signalled."""
    live = state(**RUNNING)
    gone = 2**22 + 7  # above pid_max's default: no process
    running = {"state": "RUNNING", "supervisor_pid": gone, "supervisor_ticks": 1}
    alive: Callable[[Path, subprocess.CompletedProcess[bytes]], str] = lambda case, done: (
        "" if decoy.poll() is None else "the decoy process was killed"
    )
    cases = []
    for argv in (["status"], ["cancel"]):
        name = argv[0]
        cases += [
            Case(
                f"batch_pid 0 ({name})",
                argv,
                then(live, job_record(**running, batch_pid=0, batch_ticks=1)),
                frozenset({1, 2}),
            ),
            Case(f"batch_pid -1 ({name})", argv, then(live, job_record(**running, batch_pid=-1)), frozenset({1, 2})),
            Case(
                f"supervisor_pid 0 ({name})",
                argv,
                then(live, job_record(state="RUNNING", supervisor_pid=0)),
                frozenset({1, 2}),
            ),
            Case(
                f"batch_pid of a stranger, wrong start time ({name})",
                argv,
                then(live, job_record(**running, batch_pid=decoy.pid, batch_ticks=1)),
                frozenset({0, 1}),
                check=alive,
            ),
        ]
    return cases


def set_writable(directory: Path, writable: bool) -> None:
    """Root writes into a read-only directory: an admin's immutable one (chattr +i) then."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i" if writable else "+i", str(directory)], check=True)
    else:
        directory.chmod(0o755 if writable else 0o555)


def _unrecoverable(template: Path) -> list[Case]:
    def read_only(case: Path) -> None:
        state(**RUNNING)(case)
        set_writable(chain_dir(case), False)

    return [
        Case(
            "one corrupt chain among two (list)",
            ["list", ".", "../outside"],
            then(text("state.json", "{"), lambda case: _second_chain(template, case)),
            frozenset({0}),
        ),
        Case("list /dev/null", ["list", "/dev/null"], codes=frozenset({0, 2})),
        Case(
            "15-digit local-jobs/counter (resume)",
            ["submit", "--resume", "--wait"],
            then(state(**STOPPED), text("local-jobs/counter", "9" * 15)),
            frozenset({0}),
        ),
        Case("cancel on a read-only .chain/ (cancel)", ["cancel"], read_only, frozenset({1})),
        *(
            Case(f"chain id {bad!r} in state.json (submit --new)", ["submit", "--new"], state(**STOPPED, chain_id=bad))
            for bad in ("..", "../x", "a/b")
        ),
    ]


def _second_chain(template: Path, case: Path) -> None:
    shutil.copytree(template / "work" / ".chain", case / "outside" / "other" / ".chain", symlinks=True)


def all_cases(template: Path, decoy: subprocess.Popen[bytes]) -> list[Case]:
    """Every case, by class (the issue's order)."""
    return [*_writes(), *_reads(), *_numbers(), *_nesting(), *_texts(), *_bait(decoy), *_unrecoverable(template)]
