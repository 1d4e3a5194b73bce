"""The launcher's config, ``hydra/launcher=chain``: every chain setting by its
own name (``hydra.launcher.max_iter=100``, ``hydra.launcher.partition=gpu``),
and the launcher's own keys (``wait``, ``poll``).

The fields are made from chain's settings table (``chain.core.fields``), so a
setting chain gains is a launcher key at once. Each is typed ``Any`` with
``None`` (not given) as its default: the value is checked by the setting's
own converter (``mapping``), as ``chain submit`` checks a flag, never by a
second rule of OmegaConf's, and a bad one is one line.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore

from chain.core.fields import FIELD_BY_NAME

TARGET = "hydra_plugins.hydra_chain_launcher.launcher.ChainLauncher"
# the launcher's own keys and their defaults (the chain settings' defaults are chain's)
OWN_DEFAULTS: dict[str, Any] = {
    "wait": True,  # return after the chains end, with their JobReturns; false: after submitting
    "poll": 10.0,  # seconds between two reads of the chains' state files while waiting
}
COMPOSED = ("app_cmd",)  # the launcher composes each job's app command: not a key


def setting_keys() -> list[str]:
    """The chain settings the launcher takes, in chain's table order."""
    return [name for name in FIELD_BY_NAME if name not in COMPOSED]


ChainLauncherConf = make_dataclass(
    "ChainLauncherConf",
    [
        ("_target_", str, field(default=TARGET)),
        *((name, Any, field(default=value)) for name, value in OWN_DEFAULTS.items()),
        *((name, Any, field(default=None)) for name in setting_keys()),
    ],
)
ChainLauncherConf.__doc__ = "hydra/launcher=chain: each multirun job a chain (see hydra_plugins.hydra_chain_launcher)."

ConfigStore.instance().store(group="hydra/launcher", name="chain", node=ChainLauncherConf, provider="slurm-chain")
