"""The launcher's config as chain's settings. Pure.

Each key the user gave (``hydra.launcher.<name>``, not ``None``) is checked
by its setting's own converter from chain's table, with the key's Hydra name
in the message, exactly as ``chain submit`` checks the flag: one rule for a
value, wherever it is given. The layers are the ones ``chain sweep submit``
resolves: the launcher's keys (its flags) beat the environment (``MAX_ITER``,
``CHAIN_BACKEND``, ...), which beats chain's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chain.core import convert as cv
from chain.core.fields import FIELD_BY_NAME
from chain.core.resolution import resolve
from chain.core.settings import Launcher, Settings
from chain.errors import ConfigError
from hydra_plugins.hydra_chain_launcher.config import COMPOSED, OWN_DEFAULTS

PREFIX = "hydra.launcher."
TIME_METAVAR = "TIME"  # the settings that take a Slurm time (runner_time, submitter_time, time_min)


@dataclass(frozen=True)
class LauncherOptions:
    """The launcher's config, checked: the chain settings given (their values
    as given, each one its converter accepted) and the launcher's own keys."""

    settings: dict[str, Any]
    wait: bool = True
    poll: float = 10.0


def launcher_options(config: Mapping[str, Any]) -> LauncherOptions:
    """``hydra.launcher``'s keys (plain values: ``OmegaConf.to_container``) checked;
    the first problem is a one-line ``ConfigError``."""
    given: dict[str, Any] = {}
    own = dict(OWN_DEFAULTS)
    for key, raw in config.items():
        if key == "_target_" or raw is None:
            continue
        if key in OWN_DEFAULTS:
            own[key] = raw
        elif key in COMPOSED:
            raise ConfigError(f"{PREFIX}{key}: the launcher composes the app command (your script, run again per job)")
        else:
            given[key] = check_setting(key, raw)
    wait = cv.boolean(own["wait"], f"{PREFIX}wait")
    return LauncherOptions(given, wait, _poll(own["poll"]))


def check_setting(key: str, raw: Any) -> Any:
    """``raw`` for the chain setting ``key`` if its converter accepts it (the
    value as given: the settings convert it again)."""
    spec = FIELD_BY_NAME.get(key)
    label = PREFIX + key
    if spec is None:
        raise ConfigError(f"{label}: not a chain setting (chain submit --help lists them)")
    if spec.metavar == TIME_METAVAR and isinstance(raw, int) and not isinstance(raw, bool):
        # YAML reads 1:00:00 unquoted as the number 3600, which Slurm would read as minutes
        raise ConfigError(f"{label}: give a time as a quoted string in Slurm's syntax ('1:00:00', '30:00'), got {raw}")
    value = spec.convert(raw, label)
    if key == "launcher" and value is not Launcher.NONE:
        raise ConfigError(f"{label}: the launcher runs your script with Python (torchrun, accelerate: not supported)")
    return raw


def _poll(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0.1 <= raw <= 600:
        raise ConfigError(f"{PREFIX}poll must be a number of seconds from 0.1 to 600, got {raw!r}")
    return float(raw)


def chain_settings(given: Mapping[str, Any], environ: Mapping[str, str], app_cmd: str) -> Settings:
    """The sweep's settings: ``given`` (checked by ``launcher_options``) and
    ``app_cmd``, then the environment's variables for the others, then chain's
    defaults; validated together (a runner margin past its time, ...)."""
    # the given values passed their converters in launcher_options: resolve's second pass cannot fail on them
    return resolve({**given, "app_cmd": app_cmd}, environ, {}, file_label="hydra.launcher")
