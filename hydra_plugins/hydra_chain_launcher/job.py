"""The program each chain of a Hydra multirun runs, in its job's directory::

    python -m hydra_plugins.hydra_chain_launcher.job NUM OVERRIDES [--pythonpath DIR] -- APP...

It runs ``APP`` (the user's script and its config options) in the same
process (``exec``) with the job's ``OVERRIDES`` (one shell-quoted line, the
chain's parameter), ``hydra.run.dir`` set to the current directory (the
job's Hydra output directory, where the chain runs it), ``hydra.job.num``
and ``hydra.mode=RUN`` appended (``command.job_argv``). A malformed call is
one line on stderr and exit 2, which the chain records as the app's failure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from chain.errors import ConfigError
from hydra_plugins.hydra_chain_launcher._command import PATH_OPTION, SEPARATOR, job_argv

USAGE = f"usage: python -m hydra_plugins.hydra_chain_launcher.job NUM OVERRIDES [{PATH_OPTION} DIR] -- APP..."


def parse(args: Sequence[str]) -> tuple[int, str, str, list[str]]:
    """NUM, OVERRIDES, the --pythonpath directory ("" if none) and APP; ``ValueError`` if malformed."""
    if SEPARATOR not in args:
        raise ValueError(f"no {SEPARATOR} before the app's command line")
    split = list(args).index(SEPARATOR)
    head, app = list(args[:split]), list(args[split + 1 :])
    path = ""
    if len(head) == 4 and head[2] == PATH_OPTION:
        path = head.pop(3)
        head.pop(2)
    if len(head) != 2 or not app:
        raise ValueError("expected NUM OVERRIDES, then the app's command line")
    return int(head[0]), head[1], path, app


def main(args: Sequence[str]) -> int:
    try:
        num, overrides, path, app = parse(args)
        argv = job_argv(app, num, overrides, os.getcwd())
    except ValueError as exc:
        print(f"hydra chain job: {exc} ({USAGE})", file=sys.stderr)
        return 2
    except ConfigError as exc:  # a run directory Hydra cannot be given: the chain records the failure
        print(f"hydra chain job: {exc}", file=sys.stderr)
        return 2
    if path:  # a -m module is imported from where the multirun started
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))
    sys.stdout.flush()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
