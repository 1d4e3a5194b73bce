"""The settings' CLI options (``chain.cli.options``): generated from the
settings table, each with its environment variable, TOML key and default in
its help; what was given on the command line passed on by TOML name."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from chain.cli.options import option_help, setting_flags, with_setting_options
from chain.core.fields import FIELD_BY_NAME, FIELDS


def test_a_help_line_names_the_environment_variable_the_toml_key_and_the_default() -> None:
    assert option_help(FIELD_BY_NAME["max_iter"]).endswith("[env MAX_ITER; toml max_iter; default 500]")
    assert option_help(FIELD_BY_NAME["app_cmd"]).endswith("default required]")
    assert option_help(FIELD_BY_NAME["partition"]).endswith("default none]")
    assert option_help(FIELD_BY_NAME["exclusive"]).endswith("default off]")
    hooks = option_help(FIELD_BY_NAME["hooks"])
    assert "(repeatable). [env CHAIN_HOOKS; toml hooks; default none]" in hooks
    assert all(option_help(spec)[0].isupper() for spec in FIELDS)


def _command() -> typer.Typer:
    app = typer.Typer()
    seen: dict[str, Any] = {}

    @app.command()
    @with_setting_options
    def render(dry: bool = typer.Option(False, "--dry"), **settings: Any) -> None:
        seen.update(setting_flags(settings), dry=dry)
        typer.echo(repr(sorted(seen.items())))

    return app


def test_every_setting_is_an_option_and_only_the_given_ones_are_passed_on() -> None:
    result = CliRunner().invoke(
        _command(),
        ["--max-iter", "30", "--hook", "echo a", "--hook", "echo b", "--no-exclusive", "--dry"],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == repr(
        [("dry", True), ("exclusive", False), ("hooks", ["echo a", "echo b"]), ("max_iter", "30")]
    )  # text as given: the settings layer converts every source alike


def test_a_command_declaring_a_setting_itself_is_refused() -> None:
    def submit(max_iter: int = 3) -> None:
        pass

    with pytest.raises(TypeError, match=r"submit declares setting options itself: \['max_iter'\]"):
        with_setting_options(submit)


def test_nothing_given_passes_nothing_on() -> None:
    assert setting_flags({spec.name: None for spec in FIELDS}) == {}
    assert setting_flags({"hooks": [], "max_iter": None, "ckpt_path": "n.txt"}) == {"ckpt_path": "n.txt"}
    assert setting_flags({"hooks": ("a",), "not_a_setting": 1}) == {"hooks": ["a"]}
