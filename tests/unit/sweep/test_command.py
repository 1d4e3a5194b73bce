"""A point's app command: placeholders quoted, the shell's braces left alone, parameters exported."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from chain.errors import ConfigError
from chain.sweep.command import check_template, placeholders, point_command, substitute
from chain.sweep.params import Point


def test_placeholders_are_the_names_in_braces_not_the_shells() -> None:
    template = "python3 t.py --lr {lr} ${HOME} ${CHAIN_RESUMING:+--resume} {a,b} {seed}"
    assert placeholders(template) == ["lr", "seed"]


def test_a_value_is_one_quoted_word() -> None:
    point = Point.of({"name": "it's; rm -rf ~", "lr": 0.001})
    command = substitute("echo {name} {lr}", point)
    assert shlex.split(command) == ["echo", "it's; rm -rf ~", "0.001"]


def test_an_unknown_placeholder_is_a_typo() -> None:
    with pytest.raises(ConfigError, match=r"app_cmd names \{lrr\}, which is not a parameter .*\(parameters: lr\)"):
        check_template("x --lr {lrr}", ["lr"])


def test_the_point_command_exports_the_params_to_every_command() -> None:
    point = Point.of({"lr": 0.001, "opt": "a b"})
    command = point_command("echo {lr}; env | grep ^CHAIN_ | sort", point, "lr=0.001_opt=a-b__x")
    # only the command's own exports: the test's environment may hold CHAIN_ variables of its own
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True, env=env).stdout
    assert out.splitlines() == [
        "0.001",
        "CHAIN_PARAM_LR=0.001",
        "CHAIN_PARAM_OPT=a b",
        "CHAIN_SWEEP_POINT=lr=0.001_opt=a-b__x",
    ]


def test_under_a_launcher_the_command_stays_one_plain_command() -> None:
    point = Point.of({"lr": 0.001})
    assert point_command("train.py --lr {lr}", point, "lr=0.001", export=False) == "train.py --lr 0.001"
