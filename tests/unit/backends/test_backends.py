"""`--backend auto`: Slurm when its controller answers;
where Slurm's clients are installed and the controller does not answer, a
one-line refusal (exit 2) that says so and that `--backend local` runs the
chain here; the embedded local backend only where no Slurm client exists.

A non-answering controller here: Slurm clients that fail as they do when
slurmctld is unreachable (a PATH of fake `sbatch`, `squeue`, `sinfo`,
`scontrol`); the real clients at a dead port are in
tests/e2e/test_backend_choice_e2e.py. pyslurm is hidden (or stubbed) so the
machine's own install does not decide the case."""

from __future__ import annotations

import importlib.abc
import shutil
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from chain.backends import choose_backend, slurm_installed
from chain.cli.commands import app
from chain.errors import BackendUnavailable

UNREACHABLE = "slurm_load_partitions: Unable to contact slurm controller (connect failure)"


class _NoPyslurm(importlib.abc.MetaPathFinder):
    """A machine without pyslurm, whatever this one has installed."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] == "pyslurm":
            raise ModuleNotFoundError("pyslurm hidden by the test", name="pyslurm")
        return None


@pytest.fixture
def no_pyslurm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NoPyslurm(), *sys.meta_path])


def _bin(tmp_path: Path, *, slurm: bool) -> Path:
    """A PATH directory: with `slurm`, Slurm's clients as they answer when the
    controller cannot be reached (exit 1, slurm's message); else none.
    bash is in both."""
    bindir = tmp_path / ("slurm-bin" if slurm else "bare-bin")
    bindir.mkdir()
    # bash: chain checks the app's program with it before choosing a backend
    (bindir / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    if slurm:
        for client in ("sbatch", "squeue", "sinfo", "scontrol", "sacct", "scancel"):
            script = bindir / client
            script.write_text(f"#!/bin/sh\necho '{client}: error: {UNREACHABLE}' >&2\nexit 1\n")
            script.chmod(0o755)
    return bindir


def test_slurm_installed_but_the_controller_silent_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pyslurm: None
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path, slurm=True)))
    with pytest.raises(BackendUnavailable) as caught:
        choose_backend("auto")
    message = str(caught.value)
    assert caught.value.exit_code == 2 and "\n" not in message
    assert message.startswith(
        "--backend auto: Slurm is installed here (sbatch on PATH) but its controller did not answer"
    ), message
    assert message.endswith("--backend local runs it on this machine"), message


def test_pyslurm_alone_counts_as_slurm_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pyslurm but no sbatch on PATH: still a Slurm machine, refused. The
    stub proves pyslurm is only looked up, never imported (importing it
    where libslurm finds no configuration ends the process)."""
    stub = tmp_path / "site" / "pyslurm"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise SystemExit('pyslurm imported')\n")
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.syspath_prepend(str(stub.parent))
    monkeypatch.setenv("PATH", str(_bin(tmp_path, slurm=False)))
    assert slurm_installed() == ["pyslurm installed"]
    with pytest.raises(
        BackendUnavailable,
        match=r"^--backend auto: Slurm is installed here \(pyslurm "
        r"installed\) but its controller did not answer",
    ):
        choose_backend("auto")


def test_no_slurm_client_at_all_chooses_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pyslurm: None
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path, slurm=False)))
    assert slurm_installed() == []  # bash alone is no Slurm client
    name, why = choose_backend("auto")
    assert name == "local"
    assert why == "auto: no Slurm here (no sbatch on PATH, no pyslurm), using the embedded local backend"


def test_an_explicit_backend_is_never_second_guessed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path, slurm=True)))
    assert choose_backend("local") == ("local", "--backend local")


def test_submit_refuses_in_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pyslurm: None
) -> None:
    """`chain submit` (auto, the default) beside a silent controller: exit 2,
    one line, no chain directory, nothing queued anywhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHAIN_BACKEND", raising=False)
    fake = _bin(tmp_path, slurm=True)
    result = CliRunner().invoke(app, ["submit", "--app-cmd", "true", "--max-iter", "1"], env={"PATH": str(fake)})
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr + result.stdout
    assert "its controller did not answer" in result.stderr and "--backend local runs it" in result.stderr
    assert not (tmp_path / ".chain").exists()


def test_new_beside_a_silent_controller_leaves_the_ended_chain_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pyslurm: None
) -> None:
    """`chain submit --new` is refused before it moves the ended chain aside
    (it was kept as .chain.<id> and then nothing was submitted: `chain status`
    found no chain)."""
    from chain.core.model import ChainState
    from chain.store import ChainDir, ChainStatus

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHAIN_BACKEND", raising=False)
    ended = ChainDir(tmp_path / ".chain")
    ended.create()
    ended.save_status(ChainStatus(chain_id="chain-old001", workdir=str(tmp_path), state=ChainState.COMPLETED))
    result = CliRunner().invoke(
        app, ["submit", "--new", "--app-cmd", "true", "--max-iter", "1"], env={"PATH": str(_bin(tmp_path, slurm=True))}
    )
    assert result.exit_code == 2 and "its controller did not answer" in result.stderr, result.stderr
    status = ended.load_status()
    assert status is not None and status.chain_id == "chain-old001"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".chain")) == [".chain"]


def test_a_later_accounting_answer_is_asked_when_wanted_and_an_error_is_no_answer() -> None:
    """``Backend.accounted_later``'s default: ``accounted`` asked once, when
    the answer is wanted; its error is None, as for an answer asked at once
    (a relay runner's first look must not end the runner)."""
    from fakes import FakeBackend

    from chain.core.model import JobInfo, JobState
    from chain.errors import SchedulerError

    class Accounting(FakeBackend):
        def __init__(self, answer: dict[str, JobInfo] | Exception) -> None:
            super().__init__()
            self.answer, self.asked = answer, 0

        def accounted(self, job_ids: Sequence[str]) -> dict[str, JobInfo] | None:
            self.asked += 1
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    known = {"7": JobInfo("7", JobState.RUNNING)}
    backend = Accounting(known)
    later = backend.accounted_later(["7"])
    assert backend.asked == 0
    assert later() == known and later() == known and backend.asked == 1
    failing = Accounting(SchedulerError("refusing job id '-S': not a Slurm job id"))
    assert failing.accounted_later(["-S"])() is None
