"""The job program: the app's command line completed for its job, run in
its place; a malformed call is one line and exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hydra_plugins.hydra_chain_launcher import job


class Execed(Exception):
    pass


def test_its_arguments_are_the_job_then_the_apps_command_line() -> None:
    assert job.parse(["3", "lr=1", "--", "/py", "t.py"]) == (3, "lr=1", "", ["/py", "t.py"])
    assert job.parse(["3", "lr=1", "--pythonpath", "/w", "--", "/py", "-m", "p"]) == (
        3,
        "lr=1",
        "/w",
        ["/py", "-m", "p"],
    )


@pytest.mark.parametrize(
    "args", [["3", "lr=1", "/py"], ["x", "lr=1", "--", "/py"], ["3", "--", "/py"], ["3", "lr=1", "--"]]
)
def test_a_malformed_call_is_one_line_and_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert job.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("hydra chain job: ") and err.count("\n") == 1


def test_the_app_runs_in_its_place_with_the_jobs_overrides_and_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        seen.append([path, *argv])
        raise Execed

    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/x")
    with pytest.raises(Execed):
        job.main(["2", "lr=0.1 seed=0", "--pythonpath", "/w", "--", "/py", "-m", "pkg.train"])
    run_dir = str(tmp_path.resolve())
    assert seen[0][:9] == [
        "/py", "/py", "-m", "pkg.train", "lr=0.1", "seed=0", f"hydra.run.dir={run_dir}", "hydra.job.num=2",
        "hydra.mode=RUN",
    ]  # fmt: skip
    assert os.environ["PYTHONPATH"] == f"/w{os.pathsep}/x"


def test_a_run_directory_hydra_cannot_take_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = tmp_path / "$x"
    odd.mkdir()
    monkeypatch.chdir(odd)
    assert job.main(["0", "a=1", "--", "/py", "t.py"]) == 2
    assert "interpolation" in capsys.readouterr().err
