"""chain.sh and chain.R: counter rules and the podinfo/deadline stop check."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import HELPERS, child_env


def iso(offset: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = f'set -euo pipefail; . "{HELPERS}/chain.sh"\n{script}'
    return subprocess.run(
        ["bash", "-c", full],
        cwd=cwd,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def rscript(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("Rscript") is None:  # a run without R must not show green
        pytest.fail("Rscript is not installed (scripts/setup --dev installs r-base-core)")
    full = f'source("{HELPERS}/chain.R")\n{code}'
    return subprocess.run(
        ["Rscript", "-e", full],
        cwd=cwd,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_bash_counter_roundtrip_and_garbage(tmp_path: Path) -> None:
    r = bash(
        "chain_read_counter c; chain_write_counter 17 c; chain_read_counter c; cat c; ls -A",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "17", "17", "c"]  # no temporary left behind
    (tmp_path / "c").write_text("v2 iter 10")
    r = bash("chain_read_counter c", tmp_path)
    assert r.returncode != 0 and "plain integer" in r.stderr


def test_r_counter_roundtrip_and_garbage(tmp_path: Path) -> None:
    r = rscript(
        'cat(chain_read_counter("c"), "\\n"); chain_write_counter(1234567, "c"); '
        'cat(chain_read_counter("c"), "\\n"); cat(readLines("c"), list.files(all.files=TRUE, no.. = TRUE), "\\n")',
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1234567", "1234567", "c"]
    (tmp_path / "c").write_text("v2 iter 10")
    assert rscript('chain_read_counter("c")', tmp_path).returncode != 0


# (file contents, lead, expected?, exit code, warning present?); a float is
# an offset from now, turned into an ISO instant when the test runs.
CASES: dict[str, tuple[dict[str, str | float], int, bool, str, str]] = {
    "nothing": ({}, 10, False, "", "0"),
    "empty files": ({"termination-warning-at": "", "guaranteed-until": ""}, 10, False, "", "0"),
    "warning near": ({"termination-warning-at": 30.0}, 10, True, "75", "1"),
    "warning far": ({"termination-warning-at": 3600.0}, 10, False, "", "1"),
    "warning stale": ({"termination-warning-at": -120.0}, 10, False, "", "0"),
    "unparseable": (
        {"termination-warning-at": "soon", "guaranteed-until": "x"},
        10,
        False,
        "",
        "0",
    ),
    "guarantee near": ({"guaranteed-until": 30.0}, 10, True, "", "0"),
    "guarantee past": ({"guaranteed-until": -30.0}, 10, False, "", "0"),
}


def podinfo_dir(tmp_path: Path, files: dict[str, str | float]) -> Path:
    d = tmp_path / "podinfo"
    d.mkdir()
    for name in ("termination-warning-at", "guaranteed-until"):
        value = files.get(name, "")
        (d / name).write_text(iso(value) if isinstance(value, float) else value)
    return d


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bash_stop_expected_podinfo_rules(tmp_path: Path, case: str) -> None:
    files, lead, expected, code, present = CASES[case]
    d = podinfo_dir(tmp_path, files)
    r = bash(
        f'if chain_stop_expected {lead}; then e=1; else e=0; fi; echo "$e|$CHAIN_STOP_EXIT|$CHAIN_WARNING_PRESENT"',
        tmp_path,
        CHAIN_PODINFO=str(d),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{int(expected)}|{code}|{present}"


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_r_stop_status_podinfo_rules(tmp_path: Path, case: str) -> None:
    files, lead, expected, code, present = CASES[case]
    d = podinfo_dir(tmp_path, files)
    r = rscript(
        f's <- chain_stop_status({lead}); cat(as.integer(s$expected), "|", '
        f'if (is.null(s$exit)) "" else s$exit, "|", as.integer(s$warning_present), "\\n", sep="")',
        tmp_path,
        CHAIN_PODINFO=str(d),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{int(expected)}|{code}|{present}"


def test_bash_deadline_signal_and_withdrawn_warning(tmp_path: Path) -> None:
    d = podinfo_dir(tmp_path, {"termination-warning-at": 30.0})
    script = f"""
    chain_stop_expected 5 && echo "1 $CHAIN_STOP_REASON" || echo 0
    : > "{d}/termination-warning-at"   # withdrawn: re-read, not cached
    chain_stop_expected 5 && echo 1 || echo 0
    CHAIN_DEADLINE=$(( $(date +%s) + 3 )).5
    chain_stop_expected 5 && echo "1 $CHAIN_STOP_REASON $CHAIN_STOP_EXIT" || echo 0
    chain_stop_expected 1 && echo 1 || echo 0
    chain_install_traps; kill -TERM $$; chain_sleep 0.01
    chain_stop_expected 0 && echo "1 $CHAIN_STOP_REASON $CHAIN_STOP_EXIT $CHAIN_STOP_SIGNAL_RECEIVED" || echo 0
    """
    r = bash(script, tmp_path, CHAIN_PODINFO=str(d))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "1 termination-warning",
        "0",
        "1 deadline 99",
        "0",
        "1 signal 99 TERM",
    ]


def test_r_interrupt_sets_flag(tmp_path: Path) -> None:
    # an interrupt condition, as Rscript raises on SIGINT, only sets the flag
    r = rscript(
        "ok <- chain_guard({tools::pskill(Sys.getpid(), tools::SIGINT); Sys.sleep(2)}); "
        'cat(chain_stop_requested(), chain_stop_status(0)$exit, "\\n")',
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["TRUE", "99"]


def test_write_atomic_fails_when_the_rename_fails(tmp_path: Path) -> None:
    """A checkpoint that could not be published is not reported as written."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "inner").mkdir()  # mv onto a non-empty directory fails
    (tmp_path / "ck" / "inner" / "x").write_text("x")
    r = bash("printf data | chain_write_atomic ck", tmp_path)
    assert r.returncode != 0 and "cannot rename" in r.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize(
    "text, ok", [("999999999999999999", True), ("9999999999999999999", False), ("00000000000000000000042", True)]
)
def test_read_counter_refuses_what_bash_cannot_count(tmp_path: Path, text: str, ok: bool) -> None:
    (tmp_path / "c").write_text(text + "\n")
    r = bash("chain_read_counter c", tmp_path)
    assert (r.returncode == 0) == ok, r.stderr
    if ok:
        assert r.stdout.strip() == str(int(text))
    else:
        assert "too large" in r.stderr
