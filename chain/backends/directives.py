"""The leading ``#SBATCH`` block of a batch script, found as sbatch finds it.

One scanner for the backends that read a script's directives themselves
(the local backend, the pyslurm backend); what each option means is each
backend's own.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator


class DirectiveError(ValueError):
    """An ``#SBATCH`` line that does not split as shell words; ``line`` is
    the line (stripped), ``reason`` shlex's complaint (also the cause)."""

    def __init__(self, line: str, reason: ValueError) -> None:
        super().__init__(f"{line!r}: {reason}")
        self.line = line
        self.reason = reason


def sbatch_lines(text: str) -> Iterator[tuple[str, list[str]]]:
    """Each ``#SBATCH`` line of the leading block and its shell words.

    As sbatch: the shebang and blank lines are passed over, comments that
    are not ``#SBATCH`` plus a blank or tab are ignored, and the block ends
    at the first command line. The words are ``shlex.split`` of what follows
    ``#SBATCH`` (a ``#`` word starts a comment); a line they cannot be split
    from raises ``DirectiveError`` (from shlex's ``ValueError``).
    """
    for number, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if not line or (number == 0 and line.startswith("#!")):
            continue
        if not line.startswith("#"):
            return  # sbatch stops at the first command
        if not (line.startswith("#SBATCH") and line[7:8] in (" ", "\t")):
            continue
        try:
            tokens = shlex.split(line[7:], comments=True)
        except ValueError as exc:
            raise DirectiveError(line, exc) from exc
        yield line, tokens
