"""Chain reports: usage table (``report/usage.csv``), totals
(``report/summary.json``) and the progress plot (``report/progress.png``).

Usable mid-chain or after; run by the built-in ``report`` hook at completion.
The chain's backend (built from its stored name) accounts for its jobs
(``Backend.usage``): Slurm's accounting adds queue wait, elapsed, allocated
CPUs, CPU time and MaxRSS; without it (accounting disabled or down, or a
backend whose records are only its own, as the local one's) the chain's own
records fill what they can (the node from the runner's record, the queue
wait from our clock) and the other Slurm columns stay empty. The same
request accounts the chain's submitter jobs (the *driver*); a backend
without accounting gives their elapsed time from its own job records.
``summary.json`` also holds the chain's state: ``state.json``'s when the
report is made, or, as the report hook of a completing chain (whose state is
saved after its hooks), the final one the hook is told (``CHAIN_STATE``,
``CHAIN_REASON``). The printed report (``chain.reporting.printed``) fits an
80-column terminal.
"""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chain.backends import make_backend
from chain.backends.base import Backend, JobUsage
from chain.core.model import ChainState
from chain.core.records import RunnerView
from chain.core.retry import RetryPolicy
from chain.errors import ChainError
from chain.primitives import atomic, safeio
from chain.reporting.metrics import (
    IterEvent,
    Redone,
    advance,
    chain_metrics,
    parse_iteration_log,
    preempted_runners,
    redone_from_runners,
    work_redone,
)
from chain.reporting.printed import print_report
from chain.reporting.usage import (
    COLUMNS,
    build_rows,
    driver_usage,
    fetch_usage,
    load_runners,
    load_submitter_ids,
    usage_totals,
)
from chain.store import ChainDir, ChainStatus
from chain.store.counter import counter_settings, known_counter
from chain.store.view import stored_max_iter, stored_values

if TYPE_CHECKING:
    from rich.console import Console

ITER_LOG = "iterations.log"
# bytes of the app's iteration log read at most: ~1.4 million lines of ~45 bytes (one an
# iteration of a long chain), ~600 MB and 7 s once parsed; a line past ITER_LINE_CAP is skipped
ITER_LOG_CAP = 64 << 20
ITER_LINE_CAP = 4 << 10
OWN_RECORDS = "usage from the chain's own records"
# summary.json's note when the job that ended the chain made its report (``job_report``)
PLOT_LATER = "made by the job that ended the chain, from accounting as it stood then; chain report makes the plot"
# A backend by name for a chain directory (``chain.backends.make_backend``'s form).
BackendFactory = Callable[[str, Path], Backend]
# Accounting requests get a short retry budget: a report made while Slurm is
# down says so within a minute instead of waiting out the submitter's budget.
REPORT_RETRY = RetryPolicy(attempts=4, max_delay=60.0)


def report_backend(name: str, chain_dir: Path) -> Backend:
    """The default ``BackendFactory``: the named backend with REPORT_RETRY."""
    return make_backend(name, chain_dir, REPORT_RETRY)


def final_state(status: ChainStatus | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """Pure: the chain's (state, reason) for the summary.

    state.json's, unless it has not ended and ``environ`` is a hook's of this
    chain (``CHAIN_ID`` and a valid ``CHAIN_STATE``): the submitter saves a
    completing chain's state only after its hooks, and tells them the final one.
    """
    if status is None:
        return "", ""
    told = environ.get("CHAIN_STATE", "")
    if status.state.ended or environ.get("CHAIN_ID") != status.chain_id or told not in {s.value for s in ChainState}:
        return status.state.value, status.reason
    return told, environ.get("CHAIN_REASON", "")


def _read_events(workdir: Path) -> tuple[list[IterEvent], str]:
    """The app's iteration log, read line by line within ITER_LOG_CAP, and ""
    or the report's note of why it was not read (a FIFO, a device, too large,
    unreadable): the redone work then comes from the runner records."""
    path = workdir / ITER_LOG
    events: list[IterEvent] = []
    try:
        for line in safeio.read_lines(path, ITER_LOG_CAP, ITER_LINE_CAP):  # one at a time: never the whole log
            events += parse_iteration_log(line.decode("utf-8", "replace"))
    except FileNotFoundError:  # an app that writes none
        return [], ""
    except OSError as exc:
        why = (
            f"{exc.where} {exc.problem}"
            if isinstance(exc, safeio.UnsafeFileError)
            else f"{path}: {exc.strerror or exc}"
        )
        return [], f"iteration log not read: {why}; redone work from the runner records"
    return events, ""


@dataclass(frozen=True)
class _Chain:
    """What the report reads of a chain: its state, records and iteration log."""

    dir: ChainDir
    status: ChainStatus | None
    workdir: Path
    max_iter: int
    iteration: int
    runners: list[RunnerView]
    submitters: list[str]
    events: list[IterEvent]
    redone: Redone  # from the iteration log when there is one, else from the runner records
    notes: list[str]  # why the iteration log was not read

    @classmethod
    def read(cls, chain_dir: Path) -> _Chain:
        chain = ChainDir(Path(chain_dir))
        status = chain.load_status()
        workdir = Path(status.workdir) if status and status.workdir else chain.root.parent
        runners = load_runners(chain)
        stored = stored_values(chain, lenient=True)
        recorded = (
            status.iteration if status else max([r.iter_after for r in runners if r.iter_after is not None], default=0)
        )
        events, log_note = _read_events(workdir)
        return cls(
            chain,
            status,
            workdir,
            stored_max_iter(stored),
            known_counter(recorded, workdir, **counter_settings(stored)),
            runners,
            load_submitter_ids(chain, status.submitter_job_id if status else ""),
            events,
            work_redone(events) if events else redone_from_runners(runners),
            [log_note] if log_note else [],
        )

    @property
    def runner_ids(self) -> list[str]:
        return [r.job_id for r in self.runners]


@dataclass(frozen=True)
class _Accounting:
    """Usage records of the runners and submitter jobs, by job id; their
    source (``Backend.usage_source``, "" without records); ``trusted`` when
    they are the scheduler's accounting (the runners' rows show them)."""

    records: dict[str, JobUsage]
    source: str
    trusted: bool
    notes: list[str]


def _accounting(chain: _Chain, backends: BackendFactory, settle: float) -> _Accounting:
    status = chain.status
    try:
        backend = backends(status.backend if status and status.backend else "slurm", chain.dir.root)
    except ChainError as exc:  # e.g. pyslurm does not load where the report is made
        return _Accounting({}, "", False, [f"accounting unavailable: {exc}; {OWN_RECORDS}"])
    if not backend.accounting:
        # Its own job records: the runners' are the chain's; the submitters' elapsed is new.
        records, _ = fetch_usage(backend, chain.submitters, settle=0)
        why = f"accounting unavailable: the chain ran on the {backend.name} backend; {OWN_RECORDS}"
        return _Accounting(records, backend.usage_source, False, [why])
    records, note = fetch_usage(backend, chain.runner_ids + chain.submitters, ended=_ended(chain), settle=settle)
    notes = [note + (f"; {OWN_RECORDS}" if not records else "")] if note else []
    return _Accounting(records, backend.usage_source if records else "", bool(records), notes)


def _ended(chain: _Chain) -> list[str]:
    """The jobs whose final records to wait for: every ended runner and every
    submitter but the current one, which is still running (it runs the
    report hook) or ended long before; never the job running this report
    (a relay runner ends its chain with the hooks)."""
    current = chain.status.submitter_job_id if chain.status else ""
    here = os.environ.get("SLURM_JOB_ID", "")
    ended = [r.job_id for r in chain.runners if r.judged or r.ended]
    return [j for j in ended + [j for j in chain.submitters if j != current] if j != here]


def _csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue().encode("utf-8")


def _rates(
    runners: list[RunnerView], iteration: int, max_iter: int, now: float, ended: bool, redone: Redone
) -> dict[str, Any]:
    """The span (first submission to the last runner's end), the mean rate over
    it, and ``chain status``'s metrics (no rate or ETA once the chain ended)."""
    submitted = [r.submitted for r in runners if r.submitted]
    ends = [r.end for r in runners if r.end is not None]
    span = round(max(ends) - min(submitted), 3) if ends and submitted else None
    advanced = sum(advance(r) for r in runners)
    return {
        "span_s": span,
        # iterations checkpointed per hour of the whole span (queue waits included)
        "mean_rate_per_hour": round(advanced * 3600 / span, 3) if span and advanced else None,
        "metrics": chain_metrics(runners, iteration, max_iter, now, ended=ended, redone=redone),
    }


def _plot(chain: _Chain, chain_id: str, notes: list[str]) -> Path | None:
    try:
        from chain.reporting.plot import progress_data, render_progress

        data = progress_data(chain.events, chain.runners, max_iter=chain.max_iter, chain_id=chain_id)
        return chain.dir.write_report("progress.png", render_progress(data))
    except Exception as exc:  # noqa: BLE001  (a broken plot must not lose the usage report)
        notes.append(f"progress plot failed: {type(exc).__name__}: {exc}")
        return None


def _summary(
    chain: _Chain, accounting: _Accounting, rows: list[dict[str, Any]], now: float, environ: Mapping[str, str]
) -> dict[str, Any]:
    state, reason = final_state(chain.status, environ)
    return {
        "chain_id": chain.status.chain_id if chain.status else chain.dir.root.name,
        "backend": chain.status.backend if chain.status else "",
        "state": state,
        "reason": reason,
        "iteration": chain.iteration,
        "max_iter": chain.max_iter,
        "accounting": accounting.trusted,
        "notes": accounting.notes + chain.notes,
        "totals": usage_totals(rows, chain.redone),
        "driver": driver_usage(chain.submitters, chain.runner_ids, accounting.records, accounting.source).to_json(),
        "work_redone": chain.redone.to_json(),
        "preempted": preempted_runners(chain.runners),
        **_rates(
            chain.runners, chain.iteration, chain.max_iter, now, bool(state) and ChainState(state).ended, chain.redone
        ),
        "iteration_log": str(chain.workdir / ITER_LOG) if chain.events else None,
        "generated": now,
        "files": {},
    }


def _write_files(chain: _Chain, rows: list[dict[str, Any]], summary: dict[str, Any], plot: bool) -> list[Path]:
    """usage.csv, summary.json and progress.png (its failure is a note of the
    summary; without ``plot``, an earlier one is removed: it would end before
    the chain's end)."""
    csv_path = chain.dir.write_report("usage.csv", _csv_bytes(rows))
    summary["files"]["usage"] = str(csv_path)
    paths = [csv_path]
    if not plot:
        (chain.dir.reports / "progress.png").unlink(missing_ok=True)
        summary["notes"].append(PLOT_LATER)
    png = _plot(chain, summary["chain_id"], summary["notes"]) if plot else None
    if png is not None:
        paths.append(png)
        summary["files"]["progress"] = str(png)
    summary_path = chain.dir.write_report("summary.json", atomic.json_bytes(summary))
    paths.insert(1, summary_path)
    return paths


def make_report(
    chain_dir: Path,
    *,
    echo: bool = True,
    backends: BackendFactory | None = None,
    settle: float = 15.0,
    console: Console | None = None,
    environ: Mapping[str, str] | None = None,
    plot: bool = True,
) -> list[Path]:
    """Write the report files into ``<chain_dir>/report``; return their paths.

    ``backends`` builds the chain's backend from its stored name (default:
    ``report_backend``; tests give a backend over canned output); ``settle``
    bounds the wait for the records of just-ended jobs; ``console`` is where
    ``echo`` prints (default: stdout); ``environ`` (default: ``os.environ``)
    may be a hook's, telling the final state (``final_state``); ``plot``:
    render progress.png (``job_report`` does not).
    """
    chain = _Chain.read(chain_dir)
    now = time.time()
    accounting = _accounting(chain, backends or report_backend, settle)
    records = accounting.records if accounting.trusted else {}
    rows = build_rows(chain.runners, records, None if chain.redone.unknown else chain.redone, now=now)
    summary = _summary(chain, accounting, rows, now, os.environ if environ is None else environ)
    paths = _write_files(chain, rows, summary, plot)
    if echo:
        print_report(summary, rows, console)
    return paths


def job_report(argv: Sequence[str] | None = None) -> int:
    """``python -m chain.reporting.report --chain-dir DIR``: the report hook
    of a relay runner that ends its chain, in that runner's own slot, so
    kept short: usage.csv and summary.json from accounting as it stands (one
    request, no wait for final records: the job's own cannot be final while
    it runs), no plot and no CLI to load. The next ``chain report`` (or
    ``chain sweep report``'s) makes the whole report, plot included."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m chain.reporting.report")
    parser.add_argument("--chain-dir", required=True)
    args = parser.parse_args(argv)
    make_report(Path(args.chain_dir), echo=False, settle=0.0, plot=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(job_report())
