"""``chain status``, ``chain list`` and the report show one
counter, the chain's as chain last knew it (``store.counter.known_counter``),
for every counter kind: CKPT_PATH, ``json:``, ``glob:``, ``torch:`` and a
shell command. Each kind's chain is crafted at three moments: between two
runners (the checkpoint is what the jobs recorded), mid-runner (the app
saved since: a checkpoint read without running a program shows it, a shell
command's chain the recorded counter, never run on a login node) and
completed. Before, ``chain status`` read CKPT_PATH whatever the kind (a
completed ``--counter-cmd`` chain showed ``completed 0/30``), ``chain list``
and the report showed the recorded counter."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chain.api.listing import list_rows
from chain.api.status import status_report
from chain.cli import app
from chain.core.decision import Verdict
from chain.core.model import ChainState, JobState
from chain.core.records import RunnerPhase, RunnerRecord
from chain.core.resolution import resolve
from chain.reporting.report import make_report
from chain.store import ChainDir, ChainStatus, JudgedRunner, write_json

MAX_ITER = 30
HAS_TORCH = importlib.util.find_spec("torch") is not None
TORCH_SAVE = (
    "import sys, torch; torch.save({'iter_num': int(sys.argv[2]), 'best_val_loss': 0.5, "
    "'model': {'w': torch.ones(4)}, 'config': {'max_iters': 30}}, sys.argv[1])"
)


def _file(workdir: Path, n: int) -> None:
    (workdir / "state_iter.txt").write_text(f"{n}\n")


def _json(workdir: Path, n: int) -> None:
    (workdir / "out").mkdir(exist_ok=True)
    (workdir / "out" / "ckpt.json").write_text(json.dumps({"iter_num": n, "config": {"max_iters": MAX_ITER}}))


def _glob(workdir: Path, n: int) -> None:
    (workdir / "out").mkdir(exist_ok=True)
    (workdir / "out" / f"checkpoint-{n}").mkdir()
    (workdir / "out" / f"checkpoint-{n}" / "trainer_state.json").write_text(json.dumps({"global_step": n}))


def _torch(workdir: Path, n: int) -> None:
    (workdir / "out").mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-c", TORCH_SAVE, str(workdir / "out" / "ckpt.pt"), str(n)], check=True)


def _cmd(workdir: Path, n: int) -> None:
    (workdir / "n.txt").write_text(f"{n}\n")
    (workdir / "ran").touch()  # the command leaves a mark each time it runs


# kind -> (--counter-cmd, the app's save, a program needed to read it)
KINDS: dict[str, tuple[str, Callable[[Path, int], None], bool]] = {
    "file": ("", _file, False),
    "json": ("json:out/ckpt.json:iter_num", _json, False),
    "glob": ("glob:out/checkpoint-*", _glob, False),
    "torch": ("torch:out/ckpt.pt:iter_num", _torch, False),
    "cmd": ("cat n.txt; rm -f ran", _cmd, True),
}
PARAMS = [
    pytest.param(kind, marks=pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed"))
    if kind == "torch"
    else kind
    for kind in KINDS
]


def _chain(workdir: Path, counter_cmd: str, *, recorded: int, ended: bool) -> Path:
    """A local chain: runner 1 took the counter 0 -> 10; then either runner 2
    is live (``recorded`` 10) or it took it to 30 and the chain completed."""
    chain = ChainDir(workdir / ".chain")
    chain.create()
    settings = resolve(
        {"app_cmd": "python3 train.py", "max_iter": str(MAX_ITER), "backend": "local", "counter_cmd": counter_cmd},
        {},
        {},
    )
    write_json(chain.settings_file, settings.to_json())
    now = time.time()
    spans = [(0, 10)] + ([(10, MAX_ITER)] if ended else [])
    for seq, (before, after) in enumerate(spans, start=1):
        chain.append_runner(
            JudgedRunner(
                job_id=str(10 + seq),
                seq=seq,
                state=JobState.COMPLETED,
                exit_code=0 if after == MAX_ITER else 99,
                iter_before=before,
                iter_after=after,
                verdict=Verdict.COMPLETE if after == MAX_ITER else Verdict.CONTINUE,
                reason="",
                start=now - 300 + 100 * seq,
                end=now - 220 + 100 * seq,
            )
        )
    if not ended:
        chain.write_runner_record(
            RunnerRecord("12", "c.r2", seq=2, status=RunnerPhase.RUNNING, start=now - 60, iter_before=10)
        )
    chain.save_status(
        ChainStatus(
            chain_id="chain-abcdef",
            state=ChainState.COMPLETED if ended else ChainState.RUNNING,
            workdir=str(workdir),
            backend="local",
            iteration=recorded,
            runner_seq=len(spans) + (0 if ended else 1),
            runner_job_id="" if ended else "12",
            runner_live=not ended,
        )
    )
    return chain.root


def _views(chain_dir: Path) -> tuple[int, int, int, str]:
    """The counter as chain status, chain list and the report show it, and
    chain status's first two lines."""
    shown = status_report(chain_dir, live=False).iteration
    listed = list_rows([chain_dir])[0].iteration
    make_report(chain_dir, echo=False, settle=0)
    reported = json.loads((chain_dir / "report" / "summary.json").read_text())["iteration"]
    text = CliRunner().invoke(app, ["status", "--chain-dir", str(chain_dir)]).output
    return shown, listed, reported, " / ".join(text.splitlines()[:2])


@pytest.mark.parametrize("kind", PARAMS)
def test_status_list_and_report_agree_with_the_apps_checkpoint(tmp_path: Path, kind: str) -> None:
    counter_cmd, save, runs_a_program = KINDS[kind]
    between = tmp_path / "between"
    between.mkdir()
    save(between, 10)  # runner 2 just started from runner 1's checkpoint
    assert _views(_chain(between, counter_cmd, recorded=10, ended=False))[:3] == (10, 10, 10)

    mid = tmp_path / "mid"
    mid.mkdir()
    save(mid, 10)
    save(mid, 15)  # runner 2's app saved since: the jobs recorded nothing yet
    expected = 10 if runs_a_program else 15
    assert _views(_chain(mid, counter_cmd, recorded=10, ended=False))[:3] == (expected,) * 3

    end = tmp_path / "end"
    end.mkdir()
    save(end, 10)
    save(end, MAX_ITER)
    shown, listed, reported, line = _views(_chain(end, counter_cmd, recorded=MAX_ITER, ended=True))
    assert (shown, listed, reported) == (MAX_ITER,) * 3
    assert line.startswith("chain chain-abcdef  completed") and " 30/30 (100%)" in line, line
    if runs_a_program:
        assert all((d / "ran").exists() for d in (between, mid, end))  # never run by the views


def test_a_torch_reading_imports_no_torch_and_runs_no_program(tmp_path: Path) -> None:
    """The counter of a torch: chain is read from the file by the reading
    process itself, in milliseconds: no torch import, no subprocess."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed")
    _torch(tmp_path, 25)
    probe = (
        "import subprocess, sys, time; from pathlib import Path; "
        "from chain.core.resolution import resolve; from chain.store.counter import read_counter_state; "
        "subprocess.Popen = None; "  # would fail if a program were started
        "s = resolve({'app_cmd': 'x', 'counter_cmd': 'torch:out/ckpt.pt:iter_num'}, {}, {}); "
        "t = time.perf_counter(); r = read_counter_state(s, Path(sys.argv[1])); t = time.perf_counter() - t; "
        "print(r.value, r.present, 'torch' in sys.modules, t < 0.5)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["25", "True", "False", "True"], out
