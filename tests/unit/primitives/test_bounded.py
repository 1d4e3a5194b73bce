"""chain.primitives.bounded: integers by their digits, JSON by its depth
and its numbers. A number past Python's 4300-digit limit, a
float that overflows, a document nested thousands deep: from a flag, the
environment, chain.toml, the counter, state.json, settings.json, a runner's
record or a runners.jsonl line, each is bad input or a corrupt file in one
line (or a skipped line), never "internal error" (exit 70)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _chains import make_chain
from _hostile import assert_refused, edit_json, replace_text, run_cli

from chain.core.model import ChainState
from chain.primitives.bounded import MAX_DEPTH, BoundError, check_depth, loads_json, parse_int
from chain.store import ChainDir, JudgedRunner, RunnerView

HUGE = "1" * 5000  # past Python's int() limit of 4300 digits
DEEP_JSON = "[" * 100_000 + "]" * 100_000  # past the interpreter's recursion limit
OK = ["submit", "--app-cmd", "true"]

pytestmark = pytest.mark.timeout(60)


def test_parse_int_bounds_the_digits_not_python() -> None:
    assert parse_int(" 42 ") == 42 and parse_int("-7") == -7 and parse_int("0" * 5000 + "12") == 12
    with pytest.raises(BoundError, match="a number of 5000 digits"):
        parse_int(HUGE)
    for bad in ("", "1.5", "1e3", "0x10", "--1"):
        with pytest.raises(ValueError, match="not an integer"):
            parse_int(bad)


@pytest.mark.parametrize(
    "text, problem",
    [
        (HUGE, "a number of 5000 digits"),
        ('{"a": 1e400}', "a number out of range (1e400)"),
        ('{"a": NaN}', "NaN, not a number"),
        ('{"a": -Infinity}', "-Infinity, not a number"),
        (DEEP_JSON, f"nested more than {MAX_DEPTH} deep"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} deep"),
    ],
)
def test_json_past_a_bound_is_refused_in_words(text: str, problem: str) -> None:
    with pytest.raises(BoundError) as caught:
        loads_json(text)
    assert str(caught.value) == problem


def test_json_within_the_bounds_reads_as_json() -> None:
    text = json.dumps({"a": [1, 2.5, {"b": None}], "t": 1.7e9, "n": 10**17})
    assert loads_json(text) == json.loads(text)
    check_depth(json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH))


# --- every source, through the command line ------------------------------------------------


@pytest.mark.parametrize(
    "argv, env, toml, fragment",
    [
        ([*OK, "--max-iter", HUGE], {}, "", "--max-iter must be at most 1000000000000000, got a number of 5000"),
        ([*OK, "--runner-time", HUGE], {}, "", "is longer than 365 days"),
        (OK, {"MAX_ITER": HUGE}, "", "MAX_ITER must be at most"),
        (OK, {"RUNNER_MARGIN_SEC": "-" + HUGE}, "", "RUNNER_MARGIN_SEC must be at most"),
        (OK, {"RUNNER_TIME_LIMIT": "1:" + HUGE}, "", "RUNNER_TIME_LIMIT '1:1111"),
        (OK, {}, f"max_iter = {HUGE}\n", "an integer too long to read"),
        (OK, {}, f"hooks = {'[' * 5000}{']' * 5000}\n", "nested more than"),
        (OK, {}, "hooks = " + "[" * 40 + "]" * 40 + "\n", f"nested more than {MAX_DEPTH} deep"),
        (OK, {}, "max_iter = 1e400\n", "max_iter must be an integer"),
    ],
    ids=["flag", "flag time", "env", "env negative", "env time", "toml", "toml deep", "toml 40 deep", "toml inf"],
)
def test_a_number_or_a_nesting_past_the_bounds_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], toml: str, fragment: str
) -> None:
    if toml:
        (tmp_path / "chain.toml").write_text(toml)
    assert_refused(run_cli(tmp_path, monkeypatch, argv, env), fragment)
    assert not (tmp_path / ".chain").exists(), "a refused submit left a chain directory"


def test_a_huge_counter_is_a_checkpoint_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "state_iter.txt").write_text(HUGE + "\n")
    assert_refused(run_cli(tmp_path, monkeypatch, OK), "(5000 characters)", code=3)


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        ('"runner_seq": 1', f'"runner_seq": {HUGE}', "state file"),
        ('"runner_seq": 1', '"runner_seq": 10000000000000000', "bad runner_seq 10000000000000000"),
        ('"created": 0.0', '"created": 1e300', "bad created 1e+300"),
        ('"created": 0.0', '"created": 1e400', "a number out of range (1e400)"),
        ('"hooks": []', f'"hooks": {DEEP_JSON}', "nested more than"),
        ('"node_strikes": {}', '"node_strikes": {"n1": "x"}', "bad node_strikes"),
    ],
    ids=["huge int", "int past the bound", "float past the bound", "float overflow", "deep", "ill-typed dict"],
)
def test_state_json_past_the_bounds_is_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, fragment: str
) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    replace_text(chain_dir / "state.json", old, new)
    for argv in (["status"], ["cancel"], ["submit", "--resume"]):
        result = run_cli(tmp_path, monkeypatch, argv)
        assert_refused(result, fragment)
        assert "corrupt" in result.stderr


def test_settings_json_nested_deep_is_corrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    replace_text(chain_dir / "settings.json", '"hooks": []', f'"hooks": {DEEP_JSON}')
    assert_refused(run_cli(tmp_path, monkeypatch, ["status"]), "settings file")


@pytest.mark.parametrize(
    "line",
    [
        '{"job_id": "11", "seq": ' + HUGE + "}",
        '{"job_id": "11", "seq": 2, "reason": ' + DEEP_JSON + "}",
        DEEP_JSON,
        '{"job_id": "11", "start": 1e400}',
    ],
    ids=["huge int", "deep field", "deep line", "float overflow"],
)
def test_a_runners_line_past_the_bounds_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str) -> None:
    chain_dir = make_chain(tmp_path, 2, ChainState.RUNNING)
    lines = (chain_dir / "runners.jsonl").read_text().splitlines()
    (chain_dir / "runners.jsonl").write_text("\n".join([lines[0], line, lines[1]]) + "\n")
    assert [r.job_id for r in ChainDir(chain_dir).iter_runners()] == ["10", "11"]
    for argv in (["status"], ["status", "--json"], ["logs", "--runner", "1"], ["report", "--quiet"]):
        result = run_cli(tmp_path, monkeypatch, argv)
        assert result.exit_code != 70 and "Traceback" not in result.stderr, (argv, result.stderr)


def test_a_runner_started_at_1e300_is_a_start_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``1e300`` is a finite float: the line is kept, the start it cannot
    have is unknown (a field that does not fit, as the codec reads old lines)."""
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    with (chain_dir / "runners.jsonl").open("a") as fh:
        fh.write('{"job_id": "11", "seq": 2, "start": 1e300, "end": -1e300, "iter_before": 5}\n')
    judged = JudgedRunner.from_line((chain_dir / "runners.jsonl").read_text().splitlines()[-1])
    assert judged is not None and judged.start is None and judged.end is None and judged.iter_before == 5
    assert RunnerView.merge("11", None, judged).start is None
    for argv in (["status"], ["status", "--json"], ["report", "--quiet"]):
        result = run_cli(tmp_path, monkeypatch, argv)
        assert result.exit_code == 0, (argv, result.stderr)


@pytest.mark.parametrize("record", [DEEP_JSON, '{"job_id": "11", "start": ' + HUGE + "}"], ids=["deep", "huge"])
def test_a_runner_record_past_the_bounds_is_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str
) -> None:
    chain_dir = make_chain(tmp_path, 1, ChainState.RUNNING)
    edit_json(chain_dir / "state.json", runner_job_id="11", runner_live=True, runner_seq=2)
    (chain_dir / "runners" / "11.json").write_text(record)
    assert ChainDir(chain_dir).runner_record("11") is None
    result = run_cli(tmp_path, monkeypatch, ["status"])
    assert result.exit_code == 0 and "Traceback" not in result.stderr, result.stderr
