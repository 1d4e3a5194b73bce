"""The docs' code as a reader finds it: fenced blocks with their marks,
indented blocks and inline code of the Markdown pages, and the ``chain``
command lines in them as argument lists. Pure: reading and splitting only;
the tests beside it run and check what this finds.

A block's mark is an HTML comment on the line before its opening fence,
``<!-- test: WORD ... -->``: ``local``/``slurm`` on a shell block (it runs on
those backends, ``test_docs.py``), ``app``, ``run`` or ``check`` on a Python
block (``test_python_snippets.py``), ``render WORKDIR`` on the GPU recipe's
``chain render`` (``test_command_lines.py``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

MARK = re.compile(r"^\s*<!-- test: ([\w .=/-]+) -->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s")
SHELL_LANGS = ("bash", "sh", "shell", "console")


def doc_pages() -> list[Path]:
    """The Markdown a user reads: README.md and every page of the site's
    sources (the generated Settings and Commands pages are made from the code)."""
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def example_readmes() -> list[Path]:
    return sorted((REPO / "examples").rglob("README.md"))


@dataclass(frozen=True)
class Block:
    """One code block of a page."""

    path: Path
    line: int  # 1-based line of its first line of code
    lang: str  # the fence's language; "" for an indented block
    marks: tuple[str, ...]  # the words of its <!-- test: ... --> mark
    text: str
    fenced: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced and indented code block of a Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i, in_list = 0, False
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            indent, ticks, lang = fence.groups()
            mark = MARK.match(lines[i - 1]) if i else None
            body: list[str] = []
            i += 1
            first = i + 1  # 1-based
            while i < len(lines) and not lines[i].strip().startswith(ticks):
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
                i += 1
            marks = tuple(mark.group(1).split()) if mark else ()
            found.append(Block(path, first, lang, marks, "\n".join(body) + "\n", True))
            i += 1
            continue
        if line.strip() and not line.startswith(" "):
            in_list = bool(LIST_ITEM.match(line))
        need = 8 if in_list else 4
        previous_blank = i == 0 or not lines[i - 1].strip()
        if previous_blank and line.startswith(" " * need) and line.strip():
            start, body = i, []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" " * need)):
                body.append(lines[i][need:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            found.append(Block(path, start + 1, "", (), "\n".join(body) + "\n", False))
            continue
        i += 1
    return found


def prose(path: Path) -> str:
    """The page without its code blocks (for inline code and wording checks)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    skip: set[int] = set()
    for block in blocks(path):
        count = block.text.count("\n")
        if block.fenced:  # the mark, the fences
            skip.update(range(block.line - 2, block.line + count + 1))
        else:
            skip.update(range(block.line, block.line + count))
    return "\n".join(line for n, line in enumerate(lines, 1) if n not in skip)


# ---------------------------------------------------------------- command lines

# Words a page writes in place of a value ("chain logs --runner N").
PLACEHOLDERS = {"N", "M", "K", "DIR", "FILE", "JOB", "ID", "CMD", "SPEC", "ADDR", "PATH", "REGEX", "T", "TIME"}
SHELL_VAR = re.compile(r"\$\(\(.*?\)\)|\$\([^)]*\)|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")
DUPLICATION = re.compile(r"\d*>&\d+")
SEPARATORS = {"&&", "||", ";", "|", "(", ")", "&"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
HEREDOC = re.compile(r"<<-?\s*'?\"?([A-Za-z_]+)'?\"?")


@dataclass(frozen=True)
class CommandLine:
    """One ``chain`` command as a page writes it, and its arguments."""

    where: str
    text: str
    args: tuple[str, ...]  # after "chain"
    inline: bool  # inline code in prose, not a code block


def _outside_single_quotes(line: str, change: Callable[[str], str]) -> str:
    out, quoted, start = [], False, 0
    for n, char in enumerate(line):
        if char == "'" and (n == 0 or line[n - 1] != "\\"):
            segment = line[start:n]
            out.append(segment if quoted else change(segment))
            out.append(char)
            quoted, start = not quoted, n + 1
    segment = line[start:]
    out.append(segment if quoted else change(segment))
    return "".join(out)


def substitute_variables(line: str) -> str:
    """``$VAR``, ``${...}``, ``$(...)`` outside single quotes become a
    placeholder value, as a shell would expand them to something; ``2>&1``
    goes."""
    return _outside_single_quotes(line, lambda text: DUPLICATION.sub(" ", SHELL_VAR.sub("1", text)))


def logical_lines(script: str) -> list[str]:
    """A shell script's command lines: continuations joined, heredoc bodies left out."""
    out: list[str] = []
    pending, heredoc = "", None
    for line in script.splitlines():
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = pending + line
        pending = ""
        found = HEREDOC.search(full)
        if found:
            heredoc = found.group(1)
        out.append(full)
    if pending:
        out.append(pending)
    return out


ANGLE_PLACEHOLDER = re.compile(r"<[A-Za-z][\w .-]*>")  # `.chain.<chain id>`
REDIRECTION = re.compile(r"^\d*(?:[<>]{1,2}|>&|&>)(&?\d*)$")  # `>`, `2>`, `>>`, `2>&1`
REDIRECTION_WITH_TARGET = re.compile(r"^\d*(?:[<>]{1,2}|&>)[^<>&].*$")  # `2>/dev/null`


def _tokens(line: str) -> list[str]:
    line = ANGLE_PLACEHOLDER.sub("1", substitute_variables(line))
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&|;()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return _without_redirections(list(lexer))


def _without_redirections(tokens: list[str]) -> list[str]:
    out, skip = [], False
    for token in tokens:
        if skip:
            skip = False
        elif REDIRECTION.match(token):
            skip = not REDIRECTION.match(token).group(1)  # `>` takes the next word; `2>&1` does not
        elif not REDIRECTION_WITH_TARGET.match(token):
            out.append(token)
    return out


def _elided(tokens: list[str]) -> list[str]:
    """Leave out what a page elides: ``...``, ``…`` and optional ``[X ...]``,
    and give placeholder words a value."""
    out, depth = [], 0
    for token in tokens:
        if token.startswith("["):
            depth += 1
        if depth:
            depth -= token.endswith("]")
            continue
        if token in ("...", "…"):
            continue
        out.append("1" if token in PLACEHOLDERS else token)
    return out


def chain_commands(line: str) -> list[list[str]]:
    """The ``chain`` commands of one shell command line, each as its arguments
    after ``chain`` (``cd x && MAX_ITER=5 .venv/bin/chain submit ...`` too)."""
    try:
        tokens = _tokens(line)
    except ValueError:  # an unbalanced quote: not a command line
        return []
    commands, segment = [], []
    for token in [*tokens, ";"]:
        if token in SEPARATORS or set(token) <= set("&|;()"):
            while segment and ASSIGNMENT.match(segment[0]):
                segment.pop(0)
            if segment and (segment[0] == "chain" or segment[0].endswith("/chain")):
                commands.append(_elided(segment[1:]))
            segment = []
        else:
            segment.append(token)
    return commands


def block_commands(block: Block) -> list[CommandLine]:
    out = []
    for line in logical_lines(block.text):
        for args in chain_commands(line):
            out.append(CommandLine(block.where, line.strip(), tuple(args), inline=False))
    return out


INLINE = re.compile(r"(?<!`)`(chain [^`\n]+(?:\n[^`\n]+)?)`(?!`)")
NOT_COMMANDS = ("chain runner N (job ID): ...",)  # a runner's log line, quoted


def inline_commands(path: Path) -> list[CommandLine]:
    """The ``chain ...`` inline code spans of a page's prose."""
    out = []
    for found in INLINE.finditer(prose(path)):
        text = " ".join(found.group(1).split())
        if text in NOT_COMMANDS:
            continue
        for args in chain_commands(text):
            out.append(CommandLine(str(path.relative_to(REPO)), text, tuple(args), inline=True))
    return out


def shell_blocks(path: Path) -> list[Block]:
    """The blocks that hold shell commands: fenced shell blocks, and indented
    ones (which pages use for commands)."""
    return [b for b in blocks(path) if b.lang in SHELL_LANGS or (not b.fenced and b.lang == "")]


def command_lines(paths: list[Path]) -> list[CommandLine]:
    """Every ``chain`` command line of these pages: code blocks and inline code."""
    out: list[CommandLine] = []
    for path in paths:
        for block in shell_blocks(path):
            out.extend(block_commands(block))
        out.extend(inline_commands(path))
    return out
