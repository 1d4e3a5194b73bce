"""The launcher's config, ``hydra/launcher=chain``
(``hydra_plugins.hydra_chain_launcher.config``): every chain setting but the
app command a key by its own name, not given by default, beside the
launcher's own keys."""

from __future__ import annotations

import dataclasses

from chain.core.fields import FIELD_BY_NAME
from hydra_plugins.hydra_chain_launcher.config import OWN_DEFAULTS, TARGET, ChainLauncherConf, setting_keys


def test_every_chain_setting_but_the_app_command_is_a_launcher_key() -> None:
    keys = {f.name for f in dataclasses.fields(ChainLauncherConf)}
    assert keys == (set(FIELD_BY_NAME) - {"app_cmd"}) | {"_target_", "wait", "poll"}
    conf = ChainLauncherConf()
    assert conf._target_ == TARGET and conf.wait is True and conf.max_iter is None


def test_the_setting_keys_follow_chains_table_and_leave_the_composed_command_out() -> None:
    assert setting_keys() == [name for name in FIELD_BY_NAME if name != "app_cmd"]
    assert OWN_DEFAULTS == {"wait": True, "poll": 10.0} and not set(OWN_DEFAULTS) & set(FIELD_BY_NAME)
