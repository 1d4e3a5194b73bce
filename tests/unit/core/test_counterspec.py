"""chain.core.counterspec: the --counter-cmd parser and the progress scan, on literal strings."""

from __future__ import annotations

import pytest

from chain.core.counterspec import (
    CounterKind,
    CounterSpec,
    SpecError,
    as_counter,
    compile_progress_pattern,
    key_path_value,
    last_iteration,
    parse_counter_spec,
    trailing_integer,
)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("", CounterSpec(CounterKind.FILE)),
        ("  ", CounterSpec(CounterKind.FILE)),
        (
            "json:out/trainer_state.json:global_step",
            CounterSpec(
                CounterKind.JSON,
                path="out/trainer_state.json",
                key=("global_step",),
                text="json:out/trainer_state.json:global_step",
            ),
        ),
        (
            "json:s.json:log_history.0.step",
            CounterSpec(
                CounterKind.JSON, path="s.json", key=("log_history", "0", "step"), text="json:s.json:log_history.0.step"
            ),
        ),
        ("json:c:/x.json:k", CounterSpec(CounterKind.JSON, path="c:/x.json", key=("k",), text="json:c:/x.json:k")),
        ("glob:out/checkpoint-*", CounterSpec(CounterKind.GLOB, path="out/checkpoint-*", text="glob:out/checkpoint-*")),
        (
            "torch:out/ckpt.pt:iter_num",
            CounterSpec(CounterKind.TORCH, path="out/ckpt.pt", key=("iter_num",), text="torch:out/ckpt.pt:iter_num"),
        ),
        ("python3 read.py", CounterSpec(CounterKind.CMD, command="python3 read.py", text="python3 read.py")),
        (
            "jq .step out/s.json",
            CounterSpec(CounterKind.CMD, command="jq .step out/s.json", text="jq .step out/s.json"),
        ),
        ("JSON:x:y", CounterSpec(CounterKind.CMD, command="JSON:x:y", text="JSON:x:y")),  # prefixes are lower case
    ],
)
def test_specs_parse(text: str, spec: CounterSpec) -> None:
    assert parse_counter_spec(text) == spec


@pytest.mark.parametrize(
    "text",
    [
        "json:",
        "json:x.json",
        "json::k",
        "json:x.json:",
        "json:x.json:a.",
        "torch:ckpt.pt",
        "torch::k",
        "glob:",
        "glob:  ",
    ],
)
def test_built_in_readers_without_their_parts_are_refused(text: str) -> None:
    with pytest.raises(SpecError):
        parse_counter_spec(text)


def test_only_a_shell_command_or_torch_runs_code() -> None:
    assert [parse_counter_spec(t).runs_code for t in ("", "json:a:b", "glob:c-*", "torch:a:b", "cat n")] == [
        False,
        False,
        False,
        True,
        True,
    ]


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("out/checkpoint-500", 500),
        ("checkpoint-500/", 500),
        ("ckpt_12.pt", 12),
        ("ckpt-3.tar.gz", 3),
        ("checkpoint-best", None),
        ("model.v2.bin", None),
        ("run7/checkpoint", None),
        ("007", 7),
    ],
)
def test_trailing_integers(name: str, number: int | None) -> None:
    assert trailing_integer(name) == number


def test_key_paths_index_dicts_by_name_and_lists_by_number() -> None:
    data = {"a": {"b": [10, {"c": 7}]}, "0": "zero"}
    assert key_path_value(data, ("a", "b", "1", "c")) == 7
    assert key_path_value(data, ("a", "b", "-1", "c")) == 7
    assert key_path_value(data, ("0",)) == "zero"
    for key, missing in (
        (("a", "x"), "a.x"),
        (("a", "b", "5"), "a.b.5"),
        (("a", "b", "k"), "a.b.k"),
        (("a", "b", "0", "z"), "a.b.0.z"),
    ):
        with pytest.raises(KeyError) as err:
            key_path_value(data, key)
        assert err.value.args[0] == missing


@pytest.mark.parametrize(
    ("value", "counter"),
    [(5, 5), (0, 0), (500.0, 500), (-1, None), (True, None), (2.5, None), ("5", None), (None, None), ([5], None)],
)
def test_counter_values(value: object, counter: int | None) -> None:
    assert as_counter(value) == counter


NANOGPT_LOG = """\
chain runner 2 (job 14): start, counter 40, stop signal at 12:00:05
tokens per iteration will be: 8,192
iter 40: loss 3.1000, time 12.00ms, mfu -100.00%
iter 41: loss 3.0900, time 12.00ms, mfu -100.00%
step 41: train loss 3.0900, val loss 3.1000
saving checkpoint to out
iter 42: loss 3.0800, time 12.00ms, mfu -100.00%
iter 43: loss 3.0700, time 1
"""


def test_the_last_matching_line_gives_the_iteration() -> None:
    pattern = compile_progress_pattern(r"^iter (\d+):")
    # the app was killed while printing its last line: still a line that tells
    assert last_iteration(NANOGPT_LOG, pattern) == 43
    assert last_iteration(NANOGPT_LOG.replace("iter 43: loss 3.0700, time 1\n", ""), pattern) == 42
    assert last_iteration("no iterations here\n", pattern) is None
    assert last_iteration("", pattern) is None
    # a line the pattern matches whose group holds no integer is passed over
    assert last_iteration("step 7\nstep x\n", compile_progress_pattern(r"^step (\S+)")) == 7
    # the first group counts; ^ is a line's start, not the text's
    assert last_iteration("a\n  iter 9: x\niter 8: y\n", compile_progress_pattern(r"iter (\d+): (\w)")) == 8


def test_numbers_past_any_counter_are_no_match_never_a_huge_int() -> None:
    huge = "9" * 5000  # past Python's 4300-digit int() limit
    assert last_iteration(f"step 7\nstep {huge}\n", compile_progress_pattern(r"^step (\S+)")) == 7
    with pytest.raises(KeyError):
        key_path_value({"a": [1, 2]}, ("a", huge))


def test_patterns_need_a_group_and_must_compile() -> None:
    for bad in (r"^iter \d+", "(", r"(?:iter) \d+"):
        with pytest.raises(SpecError):
            compile_progress_pattern(bad)
