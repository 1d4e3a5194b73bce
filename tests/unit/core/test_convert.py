"""The settings' value converters (``chain.core.convert``): each takes a raw
value and the name it came under, and returns what the setting holds or
raises a one-line ``ConfigError`` naming that name, the value and the form."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from chain.core import convert as c
from chain.errors import ConfigError


def _refused(fn: Any, value: Any, match: str, what: str = "--x") -> str:
    with pytest.raises(ConfigError, match=match) as err:
        fn(value, what)
    message = str(err.value)
    assert "\n" not in message and message.startswith(what), message
    return message


def test_an_integer_from_text_or_toml_within_its_bounds() -> None:
    at_least_1 = c.integer(1)
    assert at_least_1("42", "--max-iter") == 42 and at_least_1(7, "max_iter") == 7
    _refused(at_least_1, "0", "at least 1, got 0")
    _refused(at_least_1, True, "must be an integer, got True")  # a TOML boolean is no count
    _refused(at_least_1, 2.0, "must be an integer")
    _refused(at_least_1, "ten", "must be an integer, got 'ten'")
    _refused(at_least_1, c.MAX_INT + 1, f"at most {c.MAX_INT}")
    _refused(at_least_1, "9" * 400, f"at most {c.MAX_INT}")


@pytest.mark.parametrize("value", ["a\nb", "a\x00b", "a\x7fb", "a\x85b", "a\u2028b", "a\u2029b", "a\x1bb"])
def test_text_is_one_line_without_control_characters(value: str) -> None:
    _refused(c.text, value, "single line of text")


def test_text_keeps_a_tab_and_refuses_what_is_not_utf8_or_too_long() -> None:
    assert c.text("a\tb", "--partition") == "a\tb"
    _refused(c.text, b"x".decode("ascii") + "\udcff", "not valid UTF-8")
    _refused(c.text, 5, "must be a string, got 5")
    _refused(c.text, "p" * (c.MAX_TEXT + 1), f"{c.MAX_TEXT + 1} characters long; at most {c.MAX_TEXT}")
    assert c.text("p" * c.MAX_TEXT, "--partition") == "p" * c.MAX_TEXT


def test_an_app_command_must_fit_in_one_exec_argument() -> None:
    fits = "x" * c.MAX_ARGUMENT_BYTES
    assert c.app_command(fits, "--app-cmd") == fits
    message = _refused(c.app_command, "é" * (c.MAX_ARGUMENT_BYTES // 2 + 1), "bytes long", "--app-cmd")
    assert "put the command in a script" in message  # counted in bytes, not characters


@pytest.mark.parametrize(("value", "kept"), [("2", "2"), ("a100:1", "a100:1"), (" 4 ", "4"), ("", "")])
def test_a_gpu_count_is_n_or_type_n(value: str, kept: str) -> None:
    assert c.gres_count(value, "--gpus") == kept


@pytest.mark.parametrize("value", ["0", "two", "a100:0", "a100:", ":2", "1234567"])
def test_a_gpu_count_that_sbatch_would_not_take_is_refused(value: str) -> None:
    _refused(c.gres_count, value, "must be a count", "--gpus")


def test_a_memory_size_is_kept_in_capitals_and_a_toml_integer_is_megabytes() -> None:
    assert c.memory("4g", "--runner-mem") == "4G" and c.memory(2048, "runner_mem") == "2048"
    assert c.memory(" ", "--runner-mem") == ""
    _refused(c.memory, "2GB", "not a Slurm memory size", "--runner-mem")
    _refused(c.memory, True, "must be a string", "--runner-mem")  # a boolean is not 1 megabyte


def test_a_slurm_time_is_kept_as_written_and_bounded() -> None:
    assert c.time(" 1-00:00:00 ", "--runner-time") == "1-00:00:00" and c.time(30, "runner_time") == "30"
    assert c.optional_time("  ", "--time-min") == "" and c.optional_time("0:30", "--time-min") == "0:30"
    _refused(c.time, "1:2:3:4", "not a Slurm time", "--runner-time")
    _refused(c.time, "9" * 30, "days", "--runner-time")
    _refused(c.time, 10**30, "days", "runner_time")


def test_a_path_names_a_file() -> None:
    assert c.path("out/n.txt", "--ckpt-path") == "out/n.txt"
    _refused(c.path, "out/", "must name a file", "--ckpt-path")
    _refused(c.path, "  ", "must name a file", "--ckpt-path")


class _Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_a_choice_is_a_value_of_its_enum_in_any_case() -> None:
    colour = c.choice(_Colour)
    assert colour(" RED ", "--colour") is _Colour.RED
    _refused(colour, "green", r"must be one of red\|blue, got 'green'", "--colour")


def test_a_stop_signal_is_one_the_app_can_catch_named_without_sig() -> None:
    assert c.signal_name("SIGINT", "--stop-signal") == "INT" and c.signal_name("usr1", "--stop-signal") == "USR1"
    _refused(c.signal_name, "KILL", "cannot be caught", "--stop-signal")
    _refused(c.signal_name, "STOP", "cannot be caught", "--stop-signal")
    _refused(c.signal_name, "BOGUS", "not a signal name", "--stop-signal")


def test_shell_words_need_balanced_quotes_and_are_kept_as_written() -> None:
    assert c.shell_words("-n 2 --mpi='pmix v4'", "--srun-args") == "-n 2 --mpi='pmix v4'"
    _refused(c.shell_words, "-n 'open", "quotation", "--srun-args")


@pytest.mark.parametrize(("value", "meant"), [("yes", True), ("ON", True), ("1", True), (False, False), ("off", False)])
def test_a_boolean_in_its_spellings(value: Any, meant: bool) -> None:
    assert c.boolean(value, "--lookahead") is meant


def test_a_boolean_that_is_neither_is_refused() -> None:
    _refused(c.boolean, "maybe", "must be true or false, got 'maybe'", "--lookahead")


def test_commands_from_a_list_or_one_text_split_on_lines_and_double_semicolons() -> None:
    assert c.commands("echo a;; echo b\n\n echo c ", "CHAIN_HOOKS") == ("echo a", "echo b", "echo c")
    assert c.commands(["echo a", " ", "echo b"], "hooks") == ("echo a", "echo b")
    _refused(c.commands, ["echo a", 3], "must be a list of command strings", "hooks")
    _refused(c.commands, ["true"] * 101, "101 commands; at most 100", "hooks")
    _refused(c.commands, ["echo \u2028"], "single line", "hooks")


def test_a_mail_user_is_one_address() -> None:
    assert c.mail_user(" ada@example.org ", "--mail-user") == "ada@example.org"
    assert c.mail_user("", "--mail-user") == ""
    for value in ("a@x.org, b@x.org", "a b", "a;b", "x" * 255):
        _refused(c.mail_user, value, "must be one mail address", "--mail-user")


@pytest.mark.parametrize("value", ["run1", "a.b+c-d_e", "9lives", "n" * 64])
def test_a_job_name_prefix_slurm_and_the_chains_names_take(value: str) -> None:
    assert c.job_name(value, "--job-name") == value


@pytest.mark.parametrize("value", ["", ".", "..", "-x", "_x", "a/b", "a b", "n" * 65, "é"])
def test_a_job_name_that_would_leave_its_name_is_refused(value: str) -> None:
    _refused(c.job_name, value, "must be 1-64 letters, digits", "--job-name")


def test_a_counter_spec_and_a_progress_pattern_are_checked_by_their_parsers() -> None:
    assert c.counter_cmd(" json:m.json:step ", "--counter-cmd") == "json:m.json:step"
    assert c.counter_cmd("", "--counter-cmd") == ""
    _refused(c.counter_cmd, "torch:", "--counter-cmd 'torch:': ", "--counter-cmd")
    assert c.progress_pattern(r"step (\d+)", "--progress-pattern") == r"step (\d+)"
    assert c.progress_pattern("  ", "--progress-pattern") == ""
    _refused(c.progress_pattern, "step (", "--progress-pattern 'step \\(': ", "--progress-pattern")
