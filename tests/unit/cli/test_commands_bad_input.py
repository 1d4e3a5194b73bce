"""Bad input, one case a row: a one-line error naming the problem, exit 2,
no traceback, nothing submitted, nothing existing overwritten."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chain.cli.commands import app

OK = ["--app-cmd", "true"]
STATE_OK = {"chain_id": "chain-aaaaaa", "state": "running", "backend": "local", "workdir": "/tmp"}


def _files(tmp: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tmp)): p.read_bytes() for p in sorted(tmp.rglob("*")) if p.is_file()}


FIFO = "<fifo>"  # a files entry made a named pipe

# (id, argv, env, files to create, expected message fragment)
CASES = [
    ("max-iter zero", ["submit", *OK, "--max-iter", "0"], {}, {}, "--max-iter must be at least 1"),
    ("max-iter negative", ["submit", *OK, "--max-iter", "-5"], {}, {}, "--max-iter must be at least 1"),
    ("max-iter text", ["submit", *OK, "--max-iter", "abc"], {}, {}, "--max-iter must be an integer"),
    ("max-iter float", ["submit", *OK, "--max-iter", "1.5"], {}, {}, "--max-iter must be an integer"),
    ("runner time 4 fields", ["submit", *OK, "--runner-time", "1:2:3:4"], {}, {}, "is not a Slurm time"),
    ("runner time text", ["submit", *OK, "--runner-time", "abc"], {}, {}, "is not a Slurm time"),
    ("runner time zero", ["submit", *OK, "--runner-time", "0"], {}, {}, "longer than zero"),
    (
        "runner time overflows",
        ["submit", *OK, "--runner-time", "100000000000000000000"],
        {},
        {},
        "longer than 365 days",
    ),
    ("max-iter overflows", ["submit", *OK, "--max-iter", "1" + "0" * 20], {}, {}, "must be at most"),
    ("empty checkpoint path", ["submit", *OK, "--ckpt-path", ""], {}, {}, "must name a file"),
    (
        "checkpoint path a directory",
        ["submit", *OK, "--ckpt-path", "ckdir"],
        {},
        {"ckdir/x": ""},
        "is not a regular file",
    ),
    ("control character", ["submit", *OK, "--partition", "a\x1bb"], {}, {}, "no control characters"),
    ("flag not UTF-8", ["submit", *OK, "--partition", "a\udcffb"], {}, {}, "not valid UTF-8"),
    ("toml not UTF-8", ["submit", *OK], {}, {"chain.toml": "partition = '\udcff'"}, "not UTF-8"),
    (
        "template includes itself",
        ["submit", *OK, "--template-dir", "t"],
        {},
        {"t/runner.sbatch.j2": "{% include 'runner.sbatch.j2' %}"},
        "includes itself",
    ),
    ("state.json a FIFO", ["status"], {}, {".chain/state.json": "<fifo>"}, "is not a regular file"),
    (
        "runner margin = limit",
        ["submit", *OK, "--runner-time", "1", "--runner-margin", "60"],
        {},
        {},
        "runner margin 60s must be smaller than the runner time 60s",
    ),
    (
        "runner margin > limit",
        ["submit", *OK, "--runner-time", "0:30", "--runner-margin", "45"],
        {},
        {},
        "must be smaller",
    ),
    (
        "submitter margin > limit",
        ["submit", *OK, "--submitter-time", "1", "--submitter-margin", "100"],
        {},
        {},
        "submitter margin 100s must be smaller",
    ),
    ("submitter time negative", ["submit", *OK, "--submitter-time", "-1"], {}, {}, "is not a Slurm time"),
    ("runner margin negative", ["submit", *OK, "--runner-margin", "-1"], {}, {}, "at least 0"),
    ("runner margin text", ["submit", *OK, "--runner-margin", "x"], {}, {}, "must be an integer"),
    ("launch mode", ["submit", *OK, "--launch-mode", "mpirun"], {}, {}, "direct|srun"),
    ("stop signal KILL", ["submit", *OK, "--stop-signal", "KILL"], {}, {}, "cannot be caught"),
    ("stop signal unknown", ["submit", *OK, "--stop-signal", "NOPE"], {}, {}, "is not a signal name"),
    ("backend unknown", ["submit", *OK, "--backend", "kubernetes"], {}, {}, "auto|slurm|local|pyslurm"),
    ("app cmd empty", ["submit", "--app-cmd", ""], {}, {}, "no app command"),
    ("app cmd missing", ["submit"], {}, {}, "no app command"),
    ("app missing file", ["submit", "--app-cmd", "./missing.sh"], {}, {}, "app './missing.sh' does not exist"),
    (
        "app not executable",
        ["submit", "--app-cmd", "./noexec.sh"],
        {},
        {"noexec.sh": "#!/bin/sh\n"},
        "is not executable",
    ),
    ("app not on PATH", ["submit", "--app-cmd", "no-such-program-xyz --flag"], {}, {}, "not found on PATH"),
    ("app cmd bad quoting", ["submit", "--app-cmd", "python3 'unterminated"], {}, {}, "No closing quotation"),
    ("srun args bad quoting", ["submit", *OK, "--srun-args", "-n 'x"], {}, {}, "--srun-args"),
    ("job name with space", ["submit", *OK, "--job-name", "a b"], {}, {}, "1-64 letters, digits"),
    (
        "checkpoint every zero",
        ["submit", *OK, "--checkpoint-every", "0"],
        {},
        {},
        "--checkpoint-every must be at least 1",
    ),
    ("retries negative", ["submit", *OK, "--retries", "-1"], {}, {}, "--retries must be at least 0"),
    ("poll max too small", ["submit", *OK, "--poll-max", "1"], {}, {}, "--poll-max must be at least 5"),
    ("ckpt path newline", ["submit", *OK, "--ckpt-path", "a\nb"], {}, {}, "single line"),
    ("template dir missing", ["submit", *OK, "--template-dir", "/nonexistent/t"], {}, {}, "does not exist"),
    ("unknown flag", ["submit", *OK, "--bogus-flag"], {}, {}, "No such option: --bogus-flag"),
    (
        "config file missing",
        ["submit", *OK, "--config", "missing.toml"],
        {},
        {},
        "config file missing.toml does not exist",
    ),
    ("config unknown key", ["submit", *OK], {}, {"chain.toml": "max_iters = 5\n"}, "unknown key 'max_iters'"),
    ("config wrong type", ["submit", *OK], {}, {"chain.toml": 'max_iter = "many"\n'}, "max_iter must be an integer"),
    ("config syntax error", ["submit", *OK], {}, {"chain.toml": "max_iter = \n"}, "chain.toml"),
    ("config hooks not a list", ["submit", *OK], {}, {"chain.toml": "hooks = 5\n"}, "hooks must be a list"),
    ("config bool time", ["submit", *OK], {}, {"chain.toml": "runner_time = true\n"}, "runner_time"),
    ("config bool int", ["submit", *OK], {}, {"chain.toml": "max_iter = true\n"}, "must be an integer"),
    ("env MAX_ITER", ["submit", *OK], {"MAX_ITER": "abc"}, {}, "MAX_ITER must be an integer"),
    ("env RUNNER_TIME_LIMIT", ["submit", *OK], {"RUNNER_TIME_LIMIT": "bad"}, {}, "RUNNER_TIME_LIMIT 'bad'"),
    ("env LAUNCH_MODE", ["submit", *OK], {"LAUNCH_MODE": "x"}, {}, "LAUNCH_MODE must be one of"),
    ("env CHAIN_BACKEND", ["submit", *OK], {"CHAIN_BACKEND": "x"}, {}, "CHAIN_BACKEND must be one of"),
    (
        "env CHAIN_ADAPTIVE_MARGIN",
        ["submit", *OK],
        {"CHAIN_ADAPTIVE_MARGIN": "maybe"},
        {},
        "CHAIN_ADAPTIVE_MARGIN must be true or false",
    ),
    (
        "config adaptive margin type",
        ["submit", *OK],
        {},
        {"chain.toml": "adaptive_margin = 3\n"},
        "adaptive_margin must be true or false",
    ),
    (
        "env margin vs flag time",
        ["submit", *OK, "--runner-time", "1"],
        {"RUNNER_MARGIN_SEC": "70"},
        {},
        "runner margin 70s",
    ),
    (
        "template syntax error",
        ["submit", *OK, "--template-dir", "t"],
        {},
        {"t/runner.sbatch.j2": "{% if %}"},
        "runner.sbatch.j2:1",
    ),
    (
        "template undefined value",
        ["submit", *OK, "--template-dir", "t"],
        {},
        {"t/submitter.sbatch.j2": "{{ nope }}"},
        "'nope' is undefined",
    ),
    ("render bad value", ["render", *OK, "--max-iter", "x"], {}, {}, "--max-iter must be an integer"),
    ("corrupt state file", ["submit", *OK], {}, {".chain/state.json": "{not json"}, "is corrupt"),
    (
        "state file wrong field type",
        ["submit", *OK],
        {},
        {".chain/state.json": json.dumps({**STATE_OK, "submitter_cycle": "x"})},
        "submitter_cycle",
    ),
    (
        "state file bad state",
        ["status"],
        {},
        {".chain/state.json": json.dumps({**STATE_OK, "state": "exploded"})},
        "bad state 'exploded'",
    ),
    ("state file not an object", ["status"], {}, {".chain/state.json": "[1, 2]"}, "not a JSON object"),
    ("active chain", ["submit", *OK], {}, {".chain/state.json": json.dumps(STATE_OK)}, "holds an active chain"),
    ("chain dir is a file", ["submit", *OK, "--chain-dir", "afile"], {}, {"afile": "x"}, "is not a directory"),
    (
        "chain dir under a file",
        ["submit", *OK, "--chain-dir", "afile/sub"],
        {},
        {"afile": "x"},
        "cannot create chain directory",
    ),
    ("chain dir newline", ["submit", *OK, "--chain-dir", "a\nb"], {}, {}, "not a usable path"),
    ("status without chain", ["status"], {}, {}, "no chain in"),
    ("cancel without chain", ["cancel"], {}, {}, "no chain in"),
    ("resume without chain", ["submit", "--resume"], {}, {}, "nothing to resume"),
    ("report without chain", ["report"], {}, {}, "no chain"),
]


@pytest.mark.parametrize("argv, env, files, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    files: dict[str, str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("MAX_ITER", "APP_CMD", "RUNNER_TIME_LIMIT", "RUNNER_MARGIN_SEC", "LAUNCH_MODE", "CHAIN_DIR"):
        monkeypatch.delenv(var, raising=False)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if text == FIFO:
            os.mkfifo(tmp_path / name)
        else:  # surrogates stand for bytes that are not UTF-8
            (tmp_path / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    before = _files(tmp_path)
    result = CliRunner().invoke(app, argv, env={"CHAIN_BACKEND": "local", **env})
    err = result.stderr
    assert result.exit_code == 2, (result.exit_code, err, result.stdout)
    assert err.startswith("chain: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert "Traceback" not in err + result.stdout
    assert _files(tmp_path) == before, "an error changed or created files"
    assert not (tmp_path / ".chain" / "local-jobs").exists(), "something was submitted"


def test_the_reliability_page_counts_the_table_right() -> None:
    """The Reliability page's "Bad input (N cases in tests/unit/cli/test_commands_bad_input.py)"
    is this table's size (it said 61 while the table had grown), each case
    named once."""
    import re

    page = (Path(__file__).resolve().parents[3] / "docs" / "reliability.md").read_text()
    claims = re.findall(r"Bad input \((\d+) cases in\s+`tests/unit/cli/test_commands_bad_input.py`\)", page)
    assert claims == [str(len(CASES))], (claims, len(CASES))
    assert len({c[0] for c in CASES}) == len(CASES)
