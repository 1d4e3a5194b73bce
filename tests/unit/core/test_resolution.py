"""Resolving settings (``chain.core.resolution``): the layers merged (flag >
environment > file > default), the cross-field checks, what a resume does
not apply, and stored settings validated again as they are read."""

from __future__ import annotations

from typing import Any

import pytest

from chain.core.resolution import from_json, resolve, unapplied
from chain.core.settings import Launcher
from chain.errors import ConfigError

APP = {"app_cmd": "python3 app.py"}


def test_precedence_flag_env_file_default() -> None:
    file_values = {"max_iter": 10, "ckpt_path": "file.txt", "checkpoint_every": 3}
    env = {"MAX_ITER": "20", "CKPT_PATH": "env.txt"}
    s = resolve({**APP, "max_iter": "30"}, env, file_values)
    assert s.max_iter == 30  # flag
    assert s.ckpt_path == "env.txt"  # environment beats file
    assert s.checkpoint_every == 3  # file beats default
    assert s.runner_margin == 60  # default


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"gpus": "two"}, "must be a count"),
        ({"gpus_per_task": "a100:0"}, "must be a count"),
        ({"nodes": "-1"}, "at least 0"),
        ({"time_min": "2:00:00", "runner_time": "1:00:00"}, "at most the runner time"),
        ({"time_min": "0:30", "runner_margin": "60"}, "above the runner margin"),
    ],
)
def test_resource_settings_are_checked(flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve({**APP, **flags}, {}, {})


def test_a_stored_bad_memory_size_is_refused() -> None:
    stored = {**resolve(APP, {}, {}).to_json(), "runner_mem": "2GB"}
    with pytest.raises(ConfigError, match="stored runner_mem '2GB' is not a Slurm memory size"):
        from_json(stored)


def test_a_launcher_runs_one_task_a_node() -> None:
    script = {"app_cmd": "train.py"}  # torchrun starts Python itself
    assert resolve({**script, "launcher": "torchrun"}, {}, {}).ntasks_per_node == 1
    with pytest.raises(ConfigError, match="each node runs one launcher: use --nproc-per-node"):
        resolve({**script, "launcher": "torchrun", "ntasks_per_node": "2"}, {}, {})
    plain = resolve(APP, {}, {})
    assert plain.launcher is Launcher.NONE and not plain.ntasks_per_node


def test_a_resume_says_which_environment_and_file_values_it_does_not_apply() -> None:
    stored = resolve({**APP, "max_iter": "10", "partition": "short"}, {}, {})
    lines = unapplied(
        {"max_iter": "30"},  # a flag: applied, never listed
        {"MAX_ITER": "20", "CHAIN_PARTITION": "long", "CHAIN_RETRIES": str(stored.retries)},
        {"runner_time": "0:05:00", "ckpt_path": stored.ckpt_path},  # the same value: nothing to say
        stored,
    )
    assert lines == [  # in the settings table's order
        (
            "not applied on resume: config file: runner_time = '0:05:00' differs from the chain's stored "
            f"{stored.runner_time!r} (use --runner-time to change it)"
        ),
        (
            "not applied on resume: CHAIN_PARTITION = 'long' differs from the chain's stored 'short' "
            "(use --partition to change it)"
        ),
    ]
    bad = unapplied({}, {"MAX_ITER": "ten"}, {}, stored)
    assert bad == ["not applied on resume: MAX_ITER must be an integer, got 'ten'"]


def test_stored_settings_are_validated_again() -> None:
    stored: Any = resolve(APP, {}, {}).to_json()
    assert from_json(stored) == resolve(APP, {}, {})
    cases: tuple[tuple[Any, str], ...] = (
        ([1, 2], "stored settings are not a JSON object"),
        ({**stored, "max_iters": 5}, "stored settings: unknown key 'max_iters'"),
        ({**stored, "max_iter": 0}, "stored max_iter must be at least 1"),
        ({**stored, "runner_margin": 10**6}, "runner margin 1000000s must be smaller than the runner time"),
    )
    for data, message in cases:
        with pytest.raises(ConfigError, match=message):
            from_json(data)
