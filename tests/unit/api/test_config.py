"""The config file (``chain.api.config.read_config_file``): chain.toml's keys,
its ``[chain]`` table, and one-line errors for an unknown key, a wrong type
or bad syntax."""

from pathlib import Path

import pytest

from chain.api.config import read_config_file
from chain.core.resolution import resolve
from chain.errors import ConfigError

APP = {"app_cmd": "python3 app.py"}


def test_config_file_unknown_key(tmp_path: Path) -> None:
    cfg = tmp_path / "chain.toml"
    cfg.write_text("max_iter = 5\nmax_iters = 6\n")
    with pytest.raises(ConfigError, match="unknown key 'max_iters'"):
        read_config_file(cfg)


def test_config_file_wrong_type(tmp_path: Path) -> None:
    cfg = tmp_path / "chain.toml"
    cfg.write_text('max_iter = "many"\n')
    with pytest.raises(ConfigError, match="integer"):
        resolve(APP, {}, read_config_file(cfg))


def test_config_file_syntax_error(tmp_path: Path) -> None:
    cfg = tmp_path / "chain.toml"
    cfg.write_text("max_iter = \n")
    with pytest.raises(ConfigError, match="chain.toml"):
        read_config_file(cfg)


def test_config_file_chain_table_and_hooks(tmp_path: Path) -> None:
    cfg = tmp_path / "chain.toml"
    cfg.write_text('[chain]\napp_cmd = "true"\nhooks = ["echo a", "echo b"]\n')
    s = resolve({}, {}, read_config_file(cfg))
    assert s.hooks == ("echo a", "echo b")
