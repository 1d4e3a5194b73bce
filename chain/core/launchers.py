"""Launchers that stand between the runner and the app, and the stop signals
they pass on. Pure: a look at the app command's words, no I/O.

``torchrun`` (and ``python -m torch.distributed.run``/``.launch``) starts its
workers in sessions of their own, so the runner's stop signal, sent to the
app's process group, reaches only torchrun. torchrun forwards SIGINT, SIGTERM,
SIGHUP and SIGQUIT to its workers and no other: a USR1 or USR2, whose default
action ends torchrun itself, leaves the workers unsignalled, to be killed at
the wall time without a checkpoint.
"""

from __future__ import annotations

import os
import re
import shlex
import signal

from chain.primitives.signals import signal_name, signal_named

FORWARDED = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
"""The signals torchrun's agent passes on to its workers."""

_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_PYTHON = re.compile(r"python[0-9.]*")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
# Words that run the rest of their command line as a program: torchrun after one
# of them (with its options in between) is still the program chain's signal reaches.
_WRAPPERS = frozenset(
    {
        "srun",
        "mpirun",
        "mpiexec",
        "env",
        "exec",
        "time",
        "nohup",
        "nice",
        "ionice",
        "stdbuf",
        "numactl",
        "taskset",
        "timeout",
        "uv",
        "conda",
        "mamba",
        "micromamba",
        "pixi",
        "poetry",
        "apptainer",
        "singularity",
        "xvfb-run",
        "command",
    }
)
_OPERATORS = frozenset({"{", "}", "!"})
_PUNCTUATION = frozenset(";&|()<>")  # what the lexer makes tokens of its own
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def torch_launcher(command: str) -> str | None:
    """The torch launcher ``command`` runs as a program (``torchrun`` or
    ``python -m torch.distributed.run``), or None.

    Counted: the first word of a simple command (after ``NAME=value``
    assignments), the program of a wrapper such as ``srun``, ``env`` or
    ``uv run`` (any later word of its command that starts a launcher), and
    the script of ``bash -c``. Not counted: an argument of another program
    (``echo torchrun``) or a variable (``TORCHRUN=1 python x.py``)."""
    for words in simple_commands(command):
        found = _launcher(words)
        if found:
            return found
    return None


def torchrun_signal_warning(command: str, stop_signal: str) -> str | None:
    """One line for the user when ``command`` runs a torch launcher that
    would not pass ``stop_signal`` on to its workers, else None (an unknown
    signal name is the settings' error, not this check's)."""
    launcher = torch_launcher(command)
    sig = signal_named(stop_signal)
    if launcher is None or sig is None or sig in FORWARDED:
        return None
    name = signal_name(sig)
    return (
        f"--stop-signal {name} with {launcher} in --app-cmd: {launcher} forwards only "
        f"INT, TERM, HUP and QUIT to its workers, so they would never get {name} and "
        "checkpoint; use --stop-signal TERM (or INT)"
    )


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command, split at the shell's operators,
    without redirections, leading assignments and keywords. A rough lexer
    (no expansions), enough to tell a program from its arguments."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: the shell refuses it anyway; look at the words
        tokens = command.split()
    commands: list[list[str]] = [[]]
    redirected = False
    for token in tokens:
        if redirected:  # the file of a redirection (``> torchrun.log``)
            redirected = False
        elif set(token) <= _PUNCTUATION and ("<" in token or ">" in token):
            redirected = True
        elif token in _OPERATORS or set(token) <= _PUNCTUATION:
            commands.append([])
        elif commands[-1] or not (_ASSIGNMENT.match(token) or token in _KEYWORDS):
            commands[-1].append(token)
    return [words for words in commands if words]


def _launcher(words: list[str]) -> str | None:
    """The launcher the simple command ``words`` starts, or None."""
    found = _program_launcher(words)
    if found is None and os.path.basename(words[0]) in _WRAPPERS:
        # its program comes after its options, whose values look like any word: try each
        starts = (words[i:] for i in range(1, len(words)) if not words[i].startswith("-"))
        found = next((f for f in map(_program_launcher, starts) if f), None)
    return found


def _program_launcher(words: list[str]) -> str | None:
    """The launcher ``words[0]`` is (a wrapper's program is ``_launcher``'s)."""
    program = os.path.basename(words[0])
    if program == "torchrun":
        return "torchrun"
    if _PYTHON.fullmatch(program):
        return _python_module(words[1:])
    if program in _SHELLS:  # bash -c 'torchrun ...', bash -lc '...'
        for i, arg in enumerate(words[1:-1], start=1):
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg:
                return torch_launcher(words[i + 1])
    return None


def _python_module(args: list[str]) -> str | None:
    """``python -m torch.distributed.run ...`` (options before ``-m`` allowed)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m" or (arg.startswith("-m") and len(arg) > 2):
            module = args[i + 1] if arg == "-m" and i + 1 < len(args) else arg[2:]
            return f"python -m {module}" if module in _MODULES else None
        if not arg.startswith("-") or arg == "-c":
            return None  # the script or the code: what follows are its arguments
        i += 2 if arg in ("-W", "-X") else 1  # the options that take a value
    return None
