"""--counter-cmd and --progress-pattern as settings: flag, environment, TOML,
checked when the settings are made (one-line ConfigError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.api.config import read_config_file
from chain.core.counterspec import CounterKind
from chain.core.fields import FIELD_BY_NAME
from chain.core.resolution import from_json, resolve
from chain.errors import ConfigError

APP = {"app_cmd": "python3 train.py"}


def test_the_counter_spec_comes_from_flag_environment_or_file(tmp_path: Path) -> None:
    assert resolve(APP, {}, {}).counter_spec.kind is CounterKind.FILE
    flag = resolve({**APP, "counter_cmd": "json:out/state.json:global_step"}, {}, {})
    assert flag.counter_spec.kind is CounterKind.JSON and flag.counter_spec.key == ("global_step",)
    env = resolve(APP, {"CHAIN_COUNTER_CMD": "glob:out/checkpoint-*"}, {})
    assert env.counter_spec.kind is CounterKind.GLOB
    (tmp_path / "chain.toml").write_text(
        "counter_cmd = 'torch:out/ckpt.pt:iter_num'\nprogress_pattern = '^iter (\\d+):'\n"
    )
    filed = resolve(APP, {}, read_config_file(tmp_path / "chain.toml"))
    assert filed.counter_spec.kind is CounterKind.TORCH and filed.progress_pattern == r"^iter (\d+):"
    assert from_json(filed.to_json()) == filed


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"counter_cmd": "json:out/state.json"}, "--counter-cmd 'json:out/state.json': json: needs a file and a key"),
        ({"counter_cmd": "json:out/state.json:"}, "json: needs a file and a key"),
        ({"counter_cmd": "json:out/s.json:a..b"}, "has an empty part"),
        ({"counter_cmd": "torch:out/ckpt.pt"}, "torch: needs a file and a key, as torch:PATH:KEY"),
        ({"counter_cmd": "glob:"}, "glob: needs a pattern"),
        ({"progress_pattern": "iter (\\d+"}, "--progress-pattern 'iter (\\\\d+': not a valid regular expression"),
        ({"progress_pattern": "^iter \\d+"}, "has no group"),
    ],
)
def test_a_bad_spec_or_pattern_is_a_one_line_error(flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve({**APP, **flags}, {}, {})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_help_names_every_spelling_and_the_no_checkpoint_exit() -> None:
    text = FIELD_BY_NAME["counter_cmd"].help
    for word in ("json:PATH:KEY.PATH", "glob:PATTERN", "torch:PATH:KEY", "exit 100", "120 s"):
        assert word in text
    assert FIELD_BY_NAME["counter_cmd"].env == "CHAIN_COUNTER_CMD"
    assert FIELD_BY_NAME["progress_pattern"].env == "CHAIN_PROGRESS_PATTERN"


@pytest.mark.parametrize(
    ("flags", "verifies"),
    [
        ({}, False),
        ({"counter_cmd": "json:out/state.json:step"}, False),
        ({"counter_cmd": "glob:out/checkpoint-*"}, True),
        ({"verify_cmd": "python3 check.py"}, True),
    ],
)
def test_a_runner_verifies_checkpoints_with_a_verify_cmd_or_glob_checkpoints(
    flags: dict[str, str], verifies: bool
) -> None:
    assert resolve({**APP, **flags}, {}, {}).verifies is verifies
