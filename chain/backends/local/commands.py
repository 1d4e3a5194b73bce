"""``python -m chain.backends.local``: the local backend's debugging verbs::

    python -m chain.backends.local queue SPOOL [--all]
    python -m chain.backends.local show SPOOL ID
    python -m chain.backends.local cancel SPOOL ID [--signal SIG]
    python -m chain.backends.local end-time SPOOL ID

and ``_supervise SPOOL ID``, the supervisor process ``submit`` starts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from chain.backends.local.backend import LocalBackend
from chain.backends.local.spool import JobRecord, Spool
from chain.backends.local.supervisor import supervise_main
from chain.core.timefmt import format_duration
from chain.errors import ChainError


def _queue(spool: Spool, show_all: bool) -> None:
    rows: list[tuple[str, ...]] = [("JOBID", "NAME", "STATE", "TIME", "TIME_LIMIT", "EXIT", "REASON")]
    now = time.time()
    for job_id in spool.all_ids():
        record = spool.refresh(job_id)
        if record is not None and (show_all or record.active):
            rows.append(_queue_row(record, now))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def _queue_row(record: JobRecord, now: float) -> tuple[str, ...]:
    if record.start is None:
        elapsed = "-"
    else:
        elapsed = format_duration((record.end if not record.active and record.end else now) - record.start)
    limit = "UNLIMITED" if record.time_limit is None else format_duration(record.time_limit)
    code = "-" if record.exit_code is None else f"{record.exit_code}:{record.signal or 0}"
    return (record.job_id, record.name, record.state.value, elapsed, limit, code, record.reason)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chain.backends.local")
    verbs = parser.add_subparsers(dest="verb", required=True)
    sup = verbs.add_parser("_supervise", help=argparse.SUPPRESS)
    sup.add_argument("spool")
    sup.add_argument("job_id")
    queue = verbs.add_parser("queue", help="squeue-like table (active jobs; --all for every job)")
    queue.add_argument("spool")
    queue.add_argument("-a", "--all", action="store_true")
    for verb, helptext in (
        ("show", "print a job's record"),
        ("end-time", "scheduled end"),
        ("cancel", "cancel a job or send it a signal"),
    ):
        sub = verbs.add_parser(verb, help=helptext)
        sub.add_argument("spool")
        sub.add_argument("job_id")
        if verb == "cancel":
            sub.add_argument("-s", "--signal")
    args = parser.parse_args(argv)
    if args.verb == "_supervise":
        return supervise_main(args.spool, args.job_id)
    try:
        return _verb(args)
    except ChainError as exc:  # a corrupt record, a refused signal: one line
        print(exc, file=sys.stderr)
        return 1


def _verb(args: argparse.Namespace) -> int:
    spool = Spool(Path(args.spool))
    if args.verb == "queue":
        _queue(spool, args.all)
        return 0
    if args.verb == "show":
        record = spool.refresh(args.job_id)
        if record is None:
            print(f"no job {args.job_id}", file=sys.stderr)
            return 1
        print(json.dumps(record.to_json(), indent=1, sort_keys=True))
        return 0
    backend = LocalBackend(spool.root)
    if args.verb == "end-time":
        end = backend.end_time(args.job_id)
        print("" if end is None else int(end))
        return 0
    backend.cancel(args.job_id, signal=args.signal)
    return 0
