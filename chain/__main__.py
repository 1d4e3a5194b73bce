"""``python -m chain``: the CLI. The jobs' own commands (``_runner``,
``_submitter``: the last line of the rendered sbatch scripts) go to
``chain.jobs.entry.main`` before the CLI is imported (its typer costs a
runner ~0.6 s of its slot under load)."""

import sys

if len(sys.argv) > 1 and sys.argv[1] in ("_runner", "_submitter"):
    from chain.primitives.interrupt import interrupt_as_chain

    interrupt_as_chain()  # before any import that builds a dataclass (primitives.interrupt.Interrupted)
    try:
        from chain.jobs.entry import main as job_main
    except Exception as exc:  # noqa: BLE001  (a broken install: one line and the fault's code, as the CLI would)
        from chain.errors import bug_line
        from chain.primitives.codes import CliExit

        print(bug_line(exc), file=sys.stderr)
        sys.exit(CliExit.BUG)
    sys.exit(job_main(sys.argv[1:]))

from chain.cli import main

main()
