"""The leading ``#SBATCH`` block of a script as the pyslurm backend submits
it: each option as sbatch reads it, named by the attribute of pyslurm's
``JobSubmitDescription`` it sets (``load_sbatch_options`` is not used: see
``chain.backends.slurm.pyslurm``), times as whole minutes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chain.backends.directives import DirectiveError, sbatch_lines
from chain.core.timefmt import parse_slurm_time, sbatch_minutes
from chain.errors import ConfigError, SchedulerError

# sbatch's long options -> JobSubmitDescription attributes, the first one the
# installed pyslurm has wins. Any other option NAME goes to the attribute
# NAME with "-" as "_" when there is one, else it is refused.
ATTRS: dict[str, tuple[str, ...]] = {
    "job-name": ("name",),
    "output": ("standard_output",),
    "error": ("standard_error",),
    "time": ("time_limit",),
    "time-min": ("time_limit_min",),
    "dependency": ("dependencies",),
    "chdir": ("working_directory",),
    "open-mode": ("log_files_open_mode",),
    "mem": ("memory_per_node",),
    "partition": ("partitions", "partition"),
    "constraint": ("constraints",),
    "exclusive": ("resource_sharing",),
    "mail-type": ("mail_types",),
    "reservation": ("reservations",),
    "gres": ("gres_per_node",),
    "requeue": ("is_requeueable",),
    "no-requeue": ("is_requeueable",),
    "exclude": ("excluded_nodes",),
}
_SHORT = {
    "J": "job-name",
    "o": "output",
    "e": "error",
    "t": "time",
    "d": "dependency",
    "D": "chdir",
    "n": "ntasks",
    "c": "cpus-per-task",
    "N": "nodes",
    "p": "partition",
    "q": "qos",
    "A": "account",
    "C": "constraint",
    "G": "gpus",
}
# Options that take no value, and the attribute value each stands for.
_FLAGS: dict[str, Any] = {"exclusive": "no", "requeue": True, "no-requeue": False}
_MINUTES = ("time", "time-min")


def sbatch_directives(text: str, script: Path) -> dict[str, Any]:
    """The leading ``#SBATCH`` block as sbatch reads it: option -> value.

    Up to the first command; ``--opt=value``, ``--opt value``, ``-x value``
    and ``-xvalue``, values shell-quoted or not; a later one wins.
    """
    found: dict[str, Any] = {}
    try:
        for line, tokens in sbatch_lines(text):
            found.update(_options(tokens, line, script))
    except DirectiveError as exc:
        raise SchedulerError(f"cannot read the #SBATCH line {exc.line!r} of {script}: {exc.reason}") from None
    return found


def _options(tokens: list[str], line: str, script: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token, i = tokens[i], i + 1
        if token.startswith("--"):
            name, eq, text = token[2:].partition("=")
            value: Any = text if eq else _FLAGS.get(name)
        elif token.startswith("-") and len(token) > 1:
            name, value = _SHORT.get(token[1], token[1]), token[2:] or None
        else:
            raise SchedulerError(f"cannot read the #SBATCH line {line!r} of {script}: {token!r} is not an option")
        if value is None and i < len(tokens) and not tokens[i].startswith("-"):
            value, i = tokens[i], i + 1
        if value is None and (name in ATTRS or name in _SHORT.values()):
            raise SchedulerError(f"#SBATCH --{name} of {script} has no value")
        if value is None:
            value = True  # a switch pyslurm has as a boolean attribute (--overcommit)
        found[name] = _minutes(value, script) if name in _MINUTES else value
    return found


def _minutes(value: Any, script: Path) -> int | str:
    """A time as whole minutes: pyslurm 22.5 fails on a digit string."""
    if str(value).strip().lower() in ("unlimited", "infinite"):
        return "UNLIMITED"
    try:
        return sbatch_minutes(parse_slurm_time(str(value), what=f"#SBATCH --time of {script}"))
    except ConfigError as exc:
        raise SchedulerError(str(exc)) from None
