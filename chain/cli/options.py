"""The settings' CLI options, generated from the one settings table.

``chain submit`` and ``chain render`` take every setting of
``chain.core.fields.FIELDS`` as an option; ``with_setting_options`` adds them to
a command's signature (typer reads ``__signature__``), with the type, the
default and the environment variable in the help. The command receives them
as keyword arguments and passes ``setting_flags(kwargs)`` to the library.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from chain.core.fields import FIELDS, FieldSpec

F = TypeVar("F", bound=Callable[..., Any])


def _shown_default(spec: FieldSpec) -> str:
    value = spec.default
    if spec.metavar == "BOOL":
        return "on" if value else "off"
    if isinstance(value, tuple):
        return "none" if not value else " ;; ".join(value)
    text = str(getattr(value, "value", value))
    return text if text else ("required" if spec.name == "app_cmd" else "none")


def option_help(spec: FieldSpec) -> str:
    """The help line: what it does, then its environment variable, TOML key and default."""
    repeat = " (repeatable)" if spec.metavar.endswith("...") else ""
    return (
        f"{spec.help[0].upper()}{spec.help[1:]}{repeat}. "
        f"[env {spec.env}; toml {spec.name}; default {_shown_default(spec)}]"
    )


def _parameter(spec: FieldSpec) -> inspect.Parameter:
    help_text = option_help(spec)
    annotation: Any
    if spec.metavar == "BOOL":
        off = spec.off_flag or "--no-" + spec.option.removeprefix("--")
        default = typer.Option(None, f"{spec.option}/{off}", help=help_text, show_default=False)
        annotation = bool | None
    elif spec.metavar.endswith("..."):
        default = typer.Option(None, spec.option, help=help_text, metavar=spec.metavar.rstrip("."), show_default=False)
        annotation = list[str] | None
    else:
        # values stay text here: the settings layer validates every source alike
        default = typer.Option(None, spec.option, help=help_text, metavar=spec.metavar, show_default=False)
        annotation = str | None
    return inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def with_setting_options(func: F) -> F:
    """Give a command every setting as an option, before its own options."""
    own = inspect.signature(func)
    names = {spec.name for spec in FIELDS}
    clash = names & set(own.parameters)
    if clash:
        raise TypeError(f"{func.__name__} declares setting options itself: {sorted(clash)}")

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        return func(**kwargs)

    params = [_parameter(spec) for spec in FIELDS] + [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in own.parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    command.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
    return command  # type: ignore[return-value]


def setting_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The settings given on the command line (None: not given), by TOML name."""
    out: dict[str, Any] = {}
    for spec in FIELDS:
        value = values.get(spec.name)
        if value is None or (isinstance(value, list) and not value):
            continue
        out[spec.name] = list(value) if isinstance(value, (list, tuple)) else value
    return out
