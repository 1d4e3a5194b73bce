"""What the local backend reads from an sbatch script, as sbatch does:
the leading ``#SBATCH`` block, filename patterns and the time limit."""

from __future__ import annotations

from dataclasses import dataclass

from chain.backends.directives import DirectiveError, sbatch_lines
from chain.backends.local.spool import short_hostname
from chain.core.timefmt import parse_slurm_time
from chain.errors import ConfigError, SchedulerError

# sbatch options we act on, by long name; short aliases map onto them.
_SHORT = {"t": "time", "o": "output", "e": "error", "J": "job-name", "d": "dependency", "D": "chdir"}
_WANTED = frozenset(_SHORT.values()) | {"open-mode"}


@dataclass(frozen=True)
class Directives:
    """What the leading ``#SBATCH`` block of a script asks for."""

    time: str | None = None
    output: str | None = None
    error: str | None = None
    job_name: str | None = None
    dependency: str | None = None
    chdir: str | None = None
    open_mode: str | None = None


def parse_directives(text: str) -> Directives:
    """Read ``#SBATCH`` lines like sbatch: only up to the first command line.

    Both ``--opt=value`` and ``--opt value`` (and ``-t value``/``-tvalue``);
    values may be shell-quoted; later directives win; unknown options ignored.
    """
    found: dict[str, str] = {}
    try:
        for _line, tokens in sbatch_lines(text):
            _parse_tokens(tokens, found)
    except DirectiveError as exc:
        raise SchedulerError(f"cannot parse directive {exc.line!r}: {exc.reason}") from exc.reason
    return Directives(
        time=found.get("time"),
        output=found.get("output"),
        error=found.get("error"),
        job_name=found.get("job-name"),
        dependency=found.get("dependency"),
        chdir=found.get("chdir"),
        open_mode=found.get("open-mode"),
    )


def _parse_tokens(tokens: list[str], found: dict[str, str]) -> None:
    i = 0
    while i < len(tokens):
        token = tokens[i]
        value: str | None = None
        if token.startswith("--"):
            name, eq, inline = token[2:].partition("=")
            value = inline if eq else None
        elif token.startswith("-") and len(token) > 1:
            name = _SHORT.get(token[1], f"-{token[1]}")
            value = token[2:] or None
        else:
            i += 1  # a stray word: not an option
            continue
        # Options we ignore may be value-less flags (--exclusive): only take a
        # separate value when it does not look like the next option.
        if value is None and i + 1 < len(tokens):
            following = tokens[i + 1]
            if name in _WANTED or not following.startswith("-"):
                value = following
                i += 1
        if name in _WANTED and value is not None:
            found[name] = value
        i += 1


def substitute(pattern: str, job_id: str, name: str, user: str) -> str:
    """sbatch's filename patterns: %j %A (job id), %x (name), %u, %N, %%."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and i + 1 < len(pattern):
            code = pattern[i + 1]
            replacement = {
                "j": job_id,
                "A": job_id,
                "x": name,
                "u": user,
                "N": short_hostname(),
                "%": "%",
                "a": "4294967294",
            }.get(code)
            if replacement is not None:
                out.append(replacement)
                i += 2
                continue
        out.append(char)
        i += 1
    return "".join(out)


def time_limit(text: str | None, scale: float) -> float | None:
    if text is None or text.strip().upper() in ("UNLIMITED", "INFINITE", "0"):
        return None  # sbatch: --time=0 means no limit
    try:
        return parse_slurm_time(text, what="--time") * scale
    except ConfigError as exc:
        raise SchedulerError(f"sbatch: {exc}") from exc
