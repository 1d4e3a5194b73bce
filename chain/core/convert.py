"""The value converters of the settings table (``chain.core.settings.FIELDS``).

Each takes a raw value (a flag's or environment variable's text, a TOML
value, a stored JSON value) and the name it was given under (``--runner-mem``,
``CHAIN_RUNNER_MEM``, ``config file: runner_mem``) and returns the value
the setting holds, or raises a one-line ``ConfigError`` that names the
setting, the value and the accepted form. Pure, no I/O.
"""

from __future__ import annotations

import enum
import re
import shlex
import signal
from collections.abc import Callable
from typing import Any

from chain.core.counterspec import SpecError, compile_progress_pattern, parse_counter_spec
from chain.core.timefmt import MAX_SECONDS, parse_slurm_time
from chain.errors import ConfigError
from chain.primitives import bounded, signals

MAX_INT = bounded.MAX_NUMBER  # beyond any counter or second count; keeps every sum a finite float


def _shown(value: Any) -> str:
    """A value as a message repeats it: its repr, cut short when long."""
    return bounded.shown(repr(value), 60)


def integer(minimum: int) -> Callable[[Any, str], int]:
    """A whole number of at least ``minimum`` (and at most ``MAX_INT``)."""

    def convert(value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ConfigError(f"{what} must be an integer, got {_shown(value)}")
        try:
            number = value if isinstance(value, int) else bounded.parse_int(value)
        except bounded.BoundError as exc:
            raise ConfigError(f"{what} must be at most {MAX_INT}, got {exc}") from None
        except ValueError:
            raise ConfigError(f"{what} must be an integer, got {_shown(value)}") from None
        if number < minimum:
            raise ConfigError(f"{what} must be at least {minimum}, got {_shown(number)}")
        if number > MAX_INT:
            raise ConfigError(f"{what} must be at most {MAX_INT}, got {_shown(number)}")
        return number

    return convert


_CONTROL = frozenset(chr(c) for c in (*range(9), *range(10, 32), 127))  # tab is allowed


def text(value: Any, what: str) -> str:
    """One line of text: no control characters, valid UTF-8."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {value!r}")
    if any(c in value for c in _CONTROL):
        raise ConfigError(f"{what} must be a single line of text (no control characters)")
    if any("\udc80" <= c <= "\udcff" for c in value):  # bytes that were not UTF-8
        raise ConfigError(f"{what} is not valid UTF-8 text")
    return value


_GRES_COUNT = re.compile(r"([A-Za-z0-9_.-]+:)?[1-9][0-9]{0,5}")


def gres_count(value: Any, what: str) -> str:
    """A GPU count as sbatch's --gpus takes it: N or type:N (empty: not set)."""
    given = text(value, what).strip()
    if given and not _GRES_COUNT.fullmatch(given):
        raise ConfigError(f"{what} {value!r} must be a count, or type:count (e.g. 2, a100:1)")
    return given


# sbatch --mem: a whole number and an optional unit, K, M (the default), G or
# T (sbatch takes them in either case); 0 is all of the node's memory.
_MEMORY = re.compile(r"[0-9]{1,15}[KMGT]?", re.IGNORECASE)


def memory(value: Any, what: str) -> str:
    """A Slurm --mem size (``512M``, ``4G``, ``2048``, ``0``); empty: Slurm's default.

    Slurm 22.05 reads ``2GB`` as ``2G`` (it looks at the first character
    after the number only); it is refused here all the same, as the
    documented form is the number and one unit letter.
    """
    given = str(value) if isinstance(value, int) and not isinstance(value, bool) else text(value, what)
    given = given.strip()
    if given and not _MEMORY.fullmatch(given):
        raise ConfigError(
            f"{what} {value!r} is not a Slurm memory size: a whole number with an optional "
            "unit K, M, G or T (M when none; 0: all of the node's memory), e.g. 512M or 4G"
        )
    # the unit in capitals: sbatch takes either, pyslurm's parser only capitals
    return given.upper()


def optional_time(value: Any, what: str) -> str:
    """A Slurm time, or empty (not set)."""
    return time(value, what) if str(value).strip() else ""


def path(value: Any, what: str) -> str:
    """A file's path (not a directory's)."""
    given = text(value, what)
    if not given.strip() or given.endswith("/"):
        raise ConfigError(f"{what} {value!r} must name a file")
    return given


_LONG_DIGITS = re.compile(f"[0-9]{{{bounded.MAX_DIGITS + 1},}}")


def time(value: Any, what: str) -> str:
    """A Slurm time (``--time`` syntax), kept as written."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ConfigError(f"{what} {_shown(value)} is longer than {MAX_SECONDS // 86400} days")
    given = text(value, what) if not isinstance(value, int) else str(value)
    if _LONG_DIGITS.search(given):  # more digits than any time within MAX_SECONDS: never converted
        raise ConfigError(f"{what} {_shown(given)} is longer than {MAX_SECONDS // 86400} days")
    parse_slurm_time(given, what=what)
    return given.strip()


def choice(kind: type[enum.Enum]) -> Callable[[Any, str], Any]:
    """One of an enum's values, in any case."""

    def convert(value: Any, what: str) -> Any:
        try:
            return kind(str(value).strip().lower())
        except ValueError:
            choices = "|".join(str(m.value) for m in kind)
            raise ConfigError(f"{what} must be one of {choices}, got {value!r}") from None

    return convert


def signal_name(value: Any, what: str) -> str:
    """A signal the app can catch, as its name without SIG (``TERM``)."""
    sig = signals.signal_named(text(value, what))
    if sig is None:
        raise ConfigError(f"{what} {value!r} is not a signal name (e.g. TERM, INT, USR1)")
    if sig in (signal.SIGKILL, signal.SIGSTOP):
        raise ConfigError(f"{what} {value!r} cannot be caught: the app could not checkpoint")
    return signals.signal_name(sig)


def shell_words(value: Any, what: str) -> str:
    """Arguments a shell could split (balanced quotes), kept as written."""
    given = text(value, what)
    try:
        shlex.split(given)
    except ValueError as exc:
        raise ConfigError(f"{what} {given!r}: {exc}") from None
    return given


def boolean(value: Any, what: str) -> bool:
    """true/false, yes/no, on/off, 1/0."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{what} must be true or false, got {value!r}")


def commands(value: Any, what: str) -> tuple[str, ...]:
    """Shell commands: a list, or (environment) one per line or ';;'-separated."""
    if isinstance(value, str):
        items = [part.strip() for part in value.replace(";;", "\n").splitlines()]
        return tuple(item for item in items if item)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise ConfigError(f"{what} must be a list of command strings, got {value!r}")


def mail_user(value: Any, what: str) -> str:
    """One mail address or user name (empty: no mail)."""
    given = text(value, what).strip()
    if given and (len(given) > 254 or any(c.isspace() or c in ",;'\"\\" for c in given)):
        raise ConfigError(f"{what} {value!r} must be one mail address (or user name)")
    return given


def job_name(value: Any, what: str) -> str:
    """A job name prefix: 1-64 characters without spaces."""
    given = text(value, what).strip()
    if not given or any(c.isspace() for c in given) or len(given) > 64:
        raise ConfigError(f"{what} {value!r} must be 1-64 characters without spaces")
    return given


def counter_cmd(value: Any, what: str) -> str:
    """A ``--counter-cmd`` spec (``chain.core.counterspec``), kept as written
    less outer blanks; empty: the counter file CKPT_PATH."""
    given = text(value, what).strip()
    try:
        parse_counter_spec(given)
    except SpecError as exc:
        raise ConfigError(f"{what} {given!r}: {exc}") from None
    return given


def progress_pattern(value: Any, what: str) -> str:
    """A ``--progress-pattern``: a regular expression with a group (empty: none)."""
    given = text(value, what)
    if given.strip():
        try:
            compile_progress_pattern(given)
        except SpecError as exc:
            raise ConfigError(f"{what} {given!r}: {exc}") from None
    return given if given.strip() else ""
