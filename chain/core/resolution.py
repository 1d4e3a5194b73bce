"""Resolving settings: the layers merged (flag > environment > file >
default, or a stored chain's settings on resume), what a resume does not
apply, the cross-field checks, and settings stored in a chain directory
read back. Pure: the config file's values come in already read
(``chain.api.config``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from chain.core.fields import FIELD_BY_NAME, FIELDS
from chain.core.settings import Launcher, Settings
from chain.errors import ConfigError


def resolve(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    file_values: Mapping[str, Any],
    base: Settings | None = None,
    *,
    file_label: str = "config file",
) -> Settings:
    """Merge the layers (flag > environment > file > base) and validate.

    ``base`` is the defaults, or a stored chain's settings on ``--resume``.
    """
    values: dict[str, Any] = {}
    start = base or Settings()
    for spec in FIELDS:
        if flags.get(spec.name) is not None:
            values[spec.name] = spec.convert(flags[spec.name], f"--{spec.name.replace('_', '-')}")
        elif spec.env in environ:
            values[spec.name] = spec.convert(environ[spec.env], spec.env)
        elif spec.name in file_values:
            values[spec.name] = spec.convert(file_values[spec.name], f"{file_label}: {spec.name}")
        else:
            values[spec.name] = getattr(start, spec.name)
    if values["launcher"] is not Launcher.NONE and not values["ntasks_per_node"]:
        values["ntasks_per_node"] = 1  # one launcher a node: its processes are --nproc-per-node
    settings = Settings(**values)
    validate(settings)
    return settings


def unapplied(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    file_values: Mapping[str, Any],
    stored: Settings,
    *,
    file_label: str = "config file",
) -> list[str]:
    """On resume a chain keeps its stored settings and only flags change
    them: one line for each environment variable or file key that differs
    from the stored value and is therefore not applied."""
    lines: list[str] = []
    for spec in FIELDS:
        if flags.get(spec.name) is not None:
            continue
        stored_value = getattr(stored, spec.name)
        for where, raw in (
            (spec.env, environ.get(spec.env)),
            (f"{file_label}: {spec.name}", file_values.get(spec.name)),
        ):
            if raw is None:
                continue
            try:
                value = spec.convert(raw, where)
            except ConfigError as exc:
                lines.append(f"not applied on resume: {exc}")
                continue
            if value != stored_value:
                shown = getattr(stored_value, "value", stored_value)
                lines.append(
                    f"not applied on resume: {where} = {raw!r} differs from the chain's stored "
                    f"{shown!r} (use {spec.option} to change it)"
                )
    return lines


def validate(settings: Settings) -> None:
    """Cross-field checks (one-line ConfigError on the first problem)."""
    if not settings.app_cmd.strip():
        raise ConfigError("no app command: set --app-cmd, APP_CMD or app_cmd in chain.toml")
    runner = settings.runner_seconds
    if settings.runner_margin >= runner:
        raise ConfigError(f"runner margin {settings.runner_margin}s must be smaller than the runner time {runner}s")
    time_min = settings.time_min_seconds
    if time_min is not None and not settings.runner_margin < time_min <= runner:
        raise ConfigError(
            f"runner minimum time {time_min}s must be above the runner margin "
            f"{settings.runner_margin}s and at most the runner time {runner}s"
        )
    submitter = settings.submitter_seconds
    if settings.submitter_margin >= submitter:
        raise ConfigError(
            f"submitter margin {settings.submitter_margin}s must be smaller than the submitter time {submitter}s"
        )
    from chain.core.launch import strategy  # the launch strategies read Settings: imported here, not above

    problem = strategy(settings).problem(settings)
    if problem:
        raise ConfigError(problem)


def from_json(data: Mapping[str, Any]) -> Settings:
    """Settings stored in a chain directory (validated again, never trusted)."""
    if not isinstance(data, Mapping):
        raise ConfigError("stored settings are not a JSON object")
    unknown = sorted(set(data) - set(FIELD_BY_NAME))
    if unknown:
        raise ConfigError(f"stored settings: unknown key {unknown[0]!r}")
    values = {k: FIELD_BY_NAME[k].convert(v, f"stored {k}") for k, v in data.items()}
    settings = dataclasses.replace(Settings(), **values)
    validate(settings)
    return settings
