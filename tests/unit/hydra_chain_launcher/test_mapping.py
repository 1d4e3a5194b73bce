"""The launcher's config as chain's settings: every value checked by its
setting's own converter, named by its Hydra key; the layers as chain sweep's."""

from __future__ import annotations

from typing import Any

import pytest

from chain.core.fields import FIELD_BY_NAME
from chain.core.settings import Mode
from chain.errors import ConfigError
from hydra_plugins.hydra_chain_launcher._mapping import chain_settings, launcher_options
from hydra_plugins.hydra_chain_launcher.config import TARGET

APP = "python3 app.py"


def test_the_given_keys_are_kept_and_the_unset_ones_left_out() -> None:
    options = launcher_options(
        {"_target_": TARGET, "max_iter": 7, "mode": "relay", "partition": None, "wait": False, "poll": 2}
    )
    assert options.settings == {"max_iter": 7, "mode": "relay"}
    assert options.wait is False and options.poll == 2.0


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("max_iter", "abc", "hydra.launcher.max_iter must be an integer, got 'abc'"),
        ("max_iter", 0, "hydra.launcher.max_iter must be at least 1"),
        ("mode", "relayy", "hydra.launcher.mode must be one of submitter|relay"),
        ("runner_time", "soon", "hydra.launcher.runner_time"),
        ("runner_time", 3600, "quoted string in Slurm's syntax"),
        ("gpus", "many", "hydra.launcher.gpus"),
        ("hooks", [1], "hydra.launcher.hooks must be a list of command strings"),
        ("app_cmd", "python x.py", "the launcher composes the app command"),
        ("launcher", "torchrun", "torchrun, accelerate: not supported"),
        ("wait", "maybe", "hydra.launcher.wait must be true or false"),
        ("poll", 0, "hydra.launcher.poll must be a number of seconds"),
        ("poll", "1", "hydra.launcher.poll must be a number of seconds"),
        ("max_itr", 3, "hydra.launcher.max_itr: not a chain setting"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_key(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        launcher_options({key: value})
    assert "\n" not in str(caught.value)


def test_the_launchers_keys_beat_the_environment_which_beats_the_defaults() -> None:
    given = launcher_options({"max_iter": 9, "runner_time": "0:30", "runner_margin": 5, "hooks": ["echo done"]})
    environ = {"MAX_ITER": "4", "CHAIN_MODE": "relay"}
    settings = chain_settings(given.settings, environ, APP)
    assert (settings.max_iter, settings.mode, settings.runner_time) == (9, Mode.RELAY, "0:30")
    assert settings.hooks == ("echo done",) and settings.app_cmd == APP
    assert settings.partition == FIELD_BY_NAME["partition"].default


def test_a_bad_environment_value_is_named_by_its_variable() -> None:
    with pytest.raises(ConfigError, match="CHAIN_MODE must be one of"):
        chain_settings({}, {"CHAIN_MODE": "sideways"}, APP)


def test_the_settings_are_checked_together() -> None:
    given = launcher_options({"runner_time": "0:15", "runner_margin": 20})
    with pytest.raises(ConfigError, match="runner margin 20s must be smaller than the runner time 15s"):
        chain_settings(given.settings, {}, APP)
