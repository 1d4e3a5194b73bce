"""The value converters of the settings table (``chain.core.fields.FIELDS``).

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


# C0 (tab allowed), DEL, C1 and Unicode's line and paragraph separators: each ends a line for
# some reader (a shell, an sbatch directive, Python's splitlines) that another check let through
_CONTROL = frozenset(chr(c) for c in (*range(9), *range(10, 32), *range(127, 160), 0x2028, 0x2029))
MAX_TEXT = 4096  # characters of a name, a path or a hook: far beyond any real one
# one argument of an exec (Linux MAX_ARG_STRLEN, less its NUL): the app runs as `bash -c APP_CMD`
MAX_ARGUMENT_BYTES = 128 * 1024 - 1


def text(value: Any, what: str, *, limit: int = MAX_TEXT) -> str:
    """One line of text: valid UTF-8, no control characters (C0 but tab, DEL,
    C1, U+2028, U+2029), at most ``limit`` characters. Every text setting is
    checked by this one rule."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {_shown(value)}")
    if any("\udc80" <= c <= "\udcff" for c in value):  # bytes that were not UTF-8
        raise ConfigError(f"{what} is not valid UTF-8 text")
    if any(c in _CONTROL for c in value):
        raise ConfigError(f"{what} must be a single line of text (no control characters)")
    if len(value) > limit:
        raise ConfigError(f"{what} is {len(value)} characters long; at most {limit}")
    return value


def app_command(value: Any, what: str) -> str:
    """The app's shell command: one line of text that fits in one argument of
    an exec (the runner runs ``bash -c`` with it; a longer one would fail in
    every runner with "Argument list too long")."""
    size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0
    if size > MAX_ARGUMENT_BYTES:
        raise ConfigError(
            f"{what} is {size} bytes long; at most {MAX_ARGUMENT_BYTES} fit in one argument "
            "(put the command in a script and run that)"
        )
    return text(value, what, limit=MAX_ARGUMENT_BYTES)


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
    if isinstance(value, str) and _LONG_DIGITS.search(value):  # more digits than any time within MAX_SECONDS
        raise ConfigError(f"{what} {_shown(value)} is longer than {MAX_SECONDS // 86400} days")
    given = text(value, what) if not isinstance(value, int) else str(value)
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
        items = [part.strip() for part in value.replace(";;", "\n").split("\n")]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise ConfigError(f"{what} must be a list of command strings, got {_shown(value)}")
    if len(items) > 100:
        raise ConfigError(f"{what}: {len(items)} commands; at most 100")
    return tuple(text(item, what) for item in items if item.strip())


def mail_user(value: Any, what: str) -> str:
    """One mail address or user name (empty: no mail)."""
    given = text(value, what).strip()
    if given and (len(given) > 254 or any(c.isspace() or c in ",;'\"\\" for c in given)):
        raise ConfigError(f"{what} {value!r} must be one mail address (or user name)")
    return given


_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def job_name(value: Any, what: str) -> str:
    """A job name prefix: 1-64 letters, digits and ``._+-`` (a letter or a digit
    first): what every Slurm command and the chain's own names (its
    directories, ``<name>.r3``) take as they are."""
    given = text(value, what).strip()
    if not _JOB_NAME.fullmatch(given):
        raise ConfigError(
            f"{what} {_shown(value)} must be 1-64 letters, digits and . _ + - (a letter or a digit first)"
        )
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
