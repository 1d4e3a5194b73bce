"""A point's app command. Pure.

``{lr}`` in the sweep's ``app_cmd`` becomes the point's value of ``lr``,
shell-quoted (a value is one word whatever it holds). Only a parameter's
name in braces is replaced: ``${HOME}``, ``${CHAIN_RESUMING:+--resume}``
and brace expansions (``{a,b}``) are the shell's; an unknown ``{name}`` is
refused as a typo. The command is prefixed with ``export
CHAIN_PARAM_LR=...; `` for every parameter, and ``CHAIN_SWEEP_POINT`` (the
point's name), so the app and every command of a compound ``app_cmd`` read
them from the environment; ``params.json`` in the point's directory holds
them all, typed. Under ``--launcher`` (torchrun, accelerate) the app command
must stay one plain command: nothing is exported, the arguments and
``params.json`` carry the parameters.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from chain.errors import ConfigError
from chain.sweep.params import Point, scalar_text

ENV_PREFIX = "CHAIN_PARAM_"
POINT_VAR = "CHAIN_SWEEP_POINT"
PARAMS_FILE = "params.json"
_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_name(param: str) -> str:
    return ENV_PREFIX + param.upper()


def placeholders(template: str) -> list[str]:
    """The names in braces that ``substitute`` replaces, in order of appearance."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(template)]


def check_template(template: str, names: Iterable[str]) -> None:
    """Every placeholder of ``template`` is a parameter of every point."""
    known = set(names)
    unknown = [name for name in placeholders(template) if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise ConfigError(
            f"app_cmd names {{{unknown[0]}}}, which is not a parameter of every point (parameters: {listed})"
        )


def substitute(template: str, point: Point) -> str:
    """``template`` with each ``{name}`` replaced by the point's value, quoted."""
    values = point.as_dict()
    check_template(template, values)
    return _PLACEHOLDER.sub(lambda m: shlex.quote(scalar_text(values[m.group(1)])), template)


def point_command(template: str, point: Point, name: str, *, export: bool = True) -> str:
    """The point's whole app command: its parameters exported (unless not
    ``export``: a launcher takes one plain command), then ``template`` substituted."""
    command = substitute(template, point)
    if not export:
        return command
    exports = " ".join(
        f"{env}={shlex.quote(text)}"
        for env, text in [(POINT_VAR, name), *((env_name(k), scalar_text(v)) for k, v in point.params)]
    )
    return f"export {exports}; {command}"
