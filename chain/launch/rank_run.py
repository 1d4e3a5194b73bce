"""Run a user's script (or ``-m module``) as a launcher's worker, and record
how this rank ended before the interpreter tears down.

``torchrun [options] rank_run.py train.py ARGS`` runs ``train.py ARGS`` as
``python train.py ARGS`` would (``__main__``, ``sys.argv``, the script's
directory first on ``sys.path``), then writes
``$CHAIN_RANKS_DIR/rank-$RANK.json``: the rank, the world size and the exit
code the script ended with. chain judges a launched runner by these records
(``chain.core.rankends``): the launcher's own exit code hides a worker's 99,
and a teardown abort after the last save. Standard library only, and the
first thing done is to put the user's directory where Python would have put
it, so nothing of chain's is imported in the user's process.
"""

from __future__ import annotations

import json
import os
import runpy
import socket
import sys
import tempfile


def _code(exc: SystemExit) -> int:
    """The status the interpreter exits with for ``exc``, as ``sys.exit`` documents it."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int) and not isinstance(exc.code, bool):
        return exc.code & 0xFF
    return 1  # a message: printed to stderr, exit 1


def _record(code: int) -> None:
    """This rank's end, written whole (a temporary file renamed) or not at all."""
    folder = os.environ.get("CHAIN_RANKS_DIR")
    if not folder:
        return
    try:
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return
    text = json.dumps({"rank": rank, "world": world, "exit_code": code, "host": socket.gethostname()})
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".rank-{rank}.")
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, os.path.join(folder, f"rank-{rank}.json"))
    except OSError as exc:  # the run's outcome must not depend on this record
        print(f"chain rank wrapper: could not record rank {rank}'s end: {exc}", file=sys.stderr)


def _run(argv: list[str]) -> None:
    if argv[0] in ("-m", "--module"):
        if len(argv) < 2:
            raise SystemExit("chain rank wrapper: -m needs a module name")
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()  # as python -m puts the working directory first
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: rank_run.py SCRIPT [ARGS] | -m MODULE [ARGS]")
    code = 1
    try:
        _run(sys.argv[1:])
        code = 0
    except SystemExit as exc:
        code = _code(exc)
        raise
    except KeyboardInterrupt:
        code = 130
        raise
    finally:
        _record(code)


if __name__ == "__main__":
    main()
