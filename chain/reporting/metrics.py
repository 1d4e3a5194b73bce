"""Pure chain metrics: rate, ETA, efficiency, the iteration log, work redone.

No I/O here: callers read the chain's records and ``iterations.log`` and pass
their contents in, so every function is tested on literal data.

A *runner* is a ``chain.core.records.RunnerView``: its own record
(``runners/<id>.json``) and its judgement (a line of ``runners.jsonl``)
merged, either of them possibly missing: ``start``, ``end``, ``iter_before``,
``iter_after`` and, if the runner stopped the app, ``stop_sent`` (record) or
``stop_to_exit`` (both). Unknown (``None``) values are tolerated everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from chain.core.records import RunnerView

RECENT_RUNNERS = 5  # the rate is measured over the last few runners
EVENTS = ("start", "iter", "ckpt", "exit")


# --- one runner ------------------------------------------------------------------


def runner_wall(runner: RunnerView) -> float | None:
    """Seconds from the runner's start to its end (its own clock), or None."""
    if runner.start is None or runner.end is None:
        return None
    return max(0.0, runner.end - runner.start)


def useful_seconds(runner: RunnerView) -> float:
    """Time the app computed: start until the stop signal, or until it exited
    when it ended by itself (done, voluntary checkpoint, crash). 0 for a
    runner that never ran the app (superseded, preflight failure, no record)
    and for one whose counter did not advance: what it computed was never
    checkpointed, so it was lost (counting it made a chain that made no
    progress show 100 % efficiency).
    """
    start, end = runner.start, runner.end
    if start is None or end is None or runner.superseded or _stalled(runner):
        return 0.0
    cut = runner.stop_sent
    if cut is None:
        cut = end - runner.stop_to_exit if runner.stop_to_exit is not None else end
    return max(0.0, min(cut, end) - start)


def _stalled(runner: RunnerView) -> bool:
    """Both counters known and the second not past the first (a live runner
    has no ``iter_after`` yet: not stalled)."""
    before, after = runner.iter_before, runner.iter_after
    return before is not None and after is not None and after <= before


def advance(runner: RunnerView) -> int:
    return gain(runner.iter_before, runner.iter_after)


def gain(before: int | None, after: int | None) -> int:
    """Iterations a counter moved from ``before`` to ``after`` (0 when unknown or back)."""
    if before is None or after is None:
        return 0
    return max(0, after - before)


# --- the chain -------------------------------------------------------------------


def rate_per_hour(runners: list[RunnerView], iteration: int, now: float, recent: int = RECENT_RUNNERS) -> float | None:
    """Iterations per wall-clock hour over the last ``recent`` finished runners.

    The wall time runs from the end of the runner before the window (or the
    first runner's submission/start) to the last runner's end, so queue waits
    and handoffs between runners count. A live runner (no ``end``) whose
    counter already moved (``iteration`` > its ``iter_before``) is included
    up to ``now``. None when nothing advanced yet.
    """
    done = sorted((r for r in runners if runner_wall(r) is not None), key=_started)
    total, begin, end = _window(done, recent)
    live = _live_progress(runners, iteration, now)
    if live is not None:
        advanced, since = live
        total += advanced
        begin = since if begin is None else begin
        end = now
    if begin is None or end is None or end <= begin or total <= 0:
        return None
    return total * 3600.0 / (end - begin)


def _started(runner: RunnerView) -> float:
    return runner.start if runner.start is not None else 0.0


def _window(done: list[RunnerView], recent: int) -> tuple[int, float | None, float | None]:
    """(iterations, begin, end) of the last ``recent`` finished runners (by
    start): from the end of the runner before them (else the first one's
    submission or start) to the last one's end."""
    window = done[-recent:]
    if not window:
        return 0, None, None
    previous = done[-len(window) - 1] if len(done) > len(window) else None
    begin = previous.end if previous else None
    if begin is None:
        begin = window[0].submitted or window[0].start
    return sum(advance(r) for r in window), begin, window[-1].end


def _live_progress(runners: list[RunnerView], iteration: int, now: float) -> tuple[int, float] | None:
    """The live runner's (the latest started without an end) iterations so
    far and its submission (or start); None unless it advanced by ``now``."""
    live = [r for r in runners if r.start is not None and r.end is None]
    if not live:
        return None
    current = max(live, key=_started)
    before, start = current.iter_before, _started(current)
    if before is None or iteration <= before or now <= start:
        return None
    return iteration - before, current.submitted or start


def preempted_runners(runners: list[RunnerView]) -> list[str]:
    """Pure: the jobs of the runners Slurm took back (preempted or requeued),
    by their judgment's kind (``core.reasons``): not failures, not runners without progress."""
    return [r.job_id for r in runners if r.kind is not None and r.kind.taken_back]


def efficiency(runners: list[RunnerView], redone: Redone | None = None) -> float | None:
    """New work / allocated time (runner wall time) over all finished runners,
    the new work being the useful compute less the part of it spent redoing
    (``redone_part``): 0.0 when nothing was useful; None when nothing was
    allocated or when ``redone`` (default: ``redone_from_runners``) cannot
    tell the work a killed app lost, so a rework nobody saw is never counted
    as useful."""
    allocated = sum(runner_wall(r) or 0.0 for r in runners)
    redone = redone_from_runners(runners) if redone is None else redone
    if allocated <= 0 or redone.unknown:
        return None
    useful = [(r.job_id, min(useful_seconds(r), runner_wall(r) or 0.0)) for r in runners]
    return sum(u - redone_part(redone, job, u) for job, u in useful) / allocated


def redone_part(redone: Redone, job_id: str, useful: float) -> float:
    """Pure: the part of a runner's ``useful`` seconds spent computing again
    what an earlier runner computed but did not save (``redone`` counts it
    for the job that redid it): at most its useful time, so that per runner,
    as in total, allocated = new work + redone + lost."""
    return min(useful, redone.seconds_by_job.get(job_id, 0.0))


def redone_figures(runners: list[RunnerView], redone: Redone) -> dict[str, Any]:
    """``redone_iterations`` and ``redone_s``: the work the ``runners`` redid,
    as their rows of the report count it (``redone_part``); both None when
    ``redone`` cannot tell what a killed app lost."""
    if redone.unknown:
        return {"redone_iterations": None, "redone_s": None}
    jobs = list(dict.fromkeys(r.job_id for r in runners))
    useful = {r.job_id: min(useful_seconds(r), runner_wall(r) or 0.0) for r in runners}
    return {
        "redone_iterations": sum(redone.by_job.get(job, 0) for job in jobs),
        "redone_s": round(sum(redone_part(redone, job, useful[job]) for job in jobs), 3),
    }


def chain_metrics(
    runners: list[RunnerView],
    iteration: int,
    max_iter: int,
    now: float,
    *,
    ended: bool = False,
    redone: Redone | None = None,
) -> dict[str, Any]:
    """``rate_per_hour``, ``eta_seconds``, ``efficiency``, ``redone_unknown``
    (the runners whose lost work nothing tells: ``redone``, by default
    ``redone_from_runners``) and the work they redid (``redone_figures``) for
    ``chain status``.

    ``runners``: runner records or runners.jsonl entries, or both merged (as
    ``chain.reporting.usage.load_runners`` returns them); ``iteration``: the current
    counter; ``now``: epoch seconds. Unknown values are None; the ETA is 0
    once the counter reached ``max_iter``. An ``ended`` chain (completed,
    failed, stopped, cancelled) has no rate and no ETA: nothing runs, and a
    failed chain's ETA would promise an end that will not come.
    """
    redone = redone_from_runners(runners) if redone is None else redone  # the report's, from its log
    known = {
        "efficiency": efficiency(runners, redone),
        "redone_unknown": list(redone.unknown),
        **redone_figures(runners, redone),
    }
    return {**progress_metrics(runners, iteration, max_iter, now, ended=ended), **known}


def progress_metrics(
    runners: list[RunnerView], iteration: int, max_iter: int, now: float, *, ended: bool = False
) -> dict[str, float | None]:
    """``rate_per_hour`` and ``eta_seconds`` alone (``chain_metrics``'s):
    the last ``RECENT_RUNNERS`` runners (and a live one) are all it reads."""
    if ended:
        return {"rate_per_hour": None, "eta_seconds": None}
    rate = rate_per_hour(runners, iteration, now)
    remaining = max(0, max_iter - iteration)
    if remaining == 0:
        eta: float | None = 0.0
    elif rate:
        eta = remaining * 3600.0 / rate
    else:
        eta = None
    return {"rate_per_hour": rate, "eta_seconds": eta}


def format_rate(per_hour: float | None) -> str:
    """A rate as every view prints it: three significant digits, thousands
    separated (``32,400 it/h``, ``523 it/h``, ``0.52 it/h``); ``-`` when unknown.
    More digits would claim a precision the last runners' window has not."""
    if per_hour is None or not math.isfinite(per_hour) or per_hour < 0:
        return "-"
    if per_hour == 0:
        return "0 it/h"
    rounded = float(f"{per_hour:.3g}")
    decimals = max(0, 2 - math.floor(math.log10(rounded)))
    text = f"{rounded:,.{decimals}f}"
    return (text.rstrip("0").rstrip(".") if decimals else text) + " it/h"


# --- the iteration log -------------------------------------------------------------


@dataclass(frozen=True)
class IterEvent:
    """One line of ``iterations.log``: ``<epoch> <event> <iteration> <job|-> <pid> [code]``."""

    time: float
    event: str
    iteration: int
    job: str  # "-" outside Slurm
    pid: int
    code: int | None = None


def parse_iteration_log(text: str) -> list[IterEvent]:
    """Every well-formed line, in file order; torn or foreign lines are skipped."""
    events: list[IterEvent] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[1] not in EVENTS:
            continue
        try:
            code = int(parts[5]) if len(parts) > 5 else None
            events.append(IterEvent(float(parts[0]), parts[1], int(parts[2]), parts[3], int(parts[4]), code))
        except ValueError:
            continue
    return events


@dataclass(frozen=True)
class Redone:
    """Iterations computed more than once (after a restart from an older checkpoint)."""

    iterations: int  # iteration computations beyond the first of each number
    seconds: float  # time those computations took (gap to the process's previous event)
    by_job: dict[str, int]  # redone iterations per job id (the job that redid them)
    restarts: int  # app starts that went back behind what had been computed
    source: str = "iterations.log"  # or "runner records"
    # the runners (seq, else job id) whose lost work nothing tells: the figures above are then
    # a lower bound, and no efficiency is claimed
    unknown: tuple[str, ...] = ()
    seconds_by_job: dict[str, float] = field(default_factory=dict)  # ``seconds`` per job that redid them

    def to_json(self) -> dict[str, Any]:
        """``summary.json``'s ``work_redone``: a lower bound when ``unknown`` names runners."""
        return {
            "iterations": self.iterations,
            "seconds": round(self.seconds, 3),
            "restarts_behind": self.restarts,
            "by_job": self.by_job,
            "seconds_by_job": {job: round(sec, 3) for job, sec in self.seconds_by_job.items()},
            "source": self.source,
            "unknown": list(self.unknown),
        }


def work_redone(events: Iterable[IterEvent]) -> Redone:
    """Pure: from the iteration log, the iterations computed again.

    An ``iter N`` event for an N already computed by an earlier event is a
    recomputation: the work between the last committed checkpoint and the
    fault was lost and done again.
    """
    seen: set[int] = set()
    highest = 0
    last_time: dict[int, float] = {}
    by_job: dict[str, int] = {}
    seconds_by_job: dict[str, float] = {}
    count, restarts = 0, 0
    for ev in events:
        previous = last_time.get(ev.pid)
        last_time[ev.pid] = ev.time
        if ev.event == "start":
            if ev.iteration < highest:
                restarts += 1
            continue
        if ev.event != "iter":
            continue
        if ev.iteration in seen:
            count += 1
            by_job[ev.job] = by_job.get(ev.job, 0) + 1
            if previous is not None:
                seconds_by_job[ev.job] = seconds_by_job.get(ev.job, 0.0) + max(0.0, ev.time - previous)
        seen.add(ev.iteration)
        highest = max(highest, ev.iteration)
    return Redone(count, sum(seconds_by_job.values()), by_job, restarts, seconds_by_job=seconds_by_job)


# --- work redone, from the runner records --------------------------------------------

SAVED_EXITS = (0, 99)  # an app that exited so by itself had saved its progress (the contract)


def lost_iterations(runner: RunnerView) -> int | None:
    """Pure: the iterations this runner's app computed beyond the checkpoint
    it left, which the next runner computes again; None when nothing tells.

    Known from ``--progress-pattern`` (``iter_first`` .. ``iter_reached``
    computed, ``iter_after - iter_before`` kept: however the app numbers its
    iterations), or 0 for an app that saved and exited by itself (0 or 99,
    not killed), and for a runner that never ran the app. An app killed, dead
    of a signal, or failed lost what it computed since its last save: unknown.
    """
    before, after, first, reached = runner.iter_before, runner.iter_after, runner.iter_first, runner.iter_reached
    if runner.superseded or before is None:
        return 0
    if runner.app_exit_code in SAVED_EXITS and not runner.killed:
        return 0  # first: an app that prints "iter N" before computing N lost nothing by exiting
    if after is not None and first is not None and reached is not None:
        start = runner.iter_resumed if runner.iter_resumed is not None else before
        return max(0, (reached - first + 1) - (after - start))
    return None


def set_aside_iterations(runner: RunnerView) -> int:
    """Pure: the iterations this runner redid because it set newer checkpoints
    aside at its start (they failed verification): from where its app
    resumed up to the counter chain had recorded."""
    if runner.iter_resumed is None or runner.iter_before is None or runner.superseded:
        return 0
    return max(0, runner.iter_before - runner.iter_resumed)


def _ran(runner: RunnerView) -> bool:
    return not runner.superseded and runner.iter_before is not None


def lost_and_redone(runners: list[RunnerView]) -> list[tuple[RunnerView, RunnerView, int | None]]:
    """Pure: (runner, the next runner that ran the app, what the first lost)
    for each runner that advanced and has such a successor: what the report
    counts and the plot draws."""
    ran = [r for r in runners if _ran(r) and r.iter_after is not None]
    return [(loser, redoer, lost_iterations(loser)) for loser, redoer in pairwise(ran) if not _stalled(loser)]


def redone_from_runners(runners: list[RunnerView]) -> Redone:
    """Pure: the work redone in a chain with no iteration log, from its runner
    records (in order): what each runner's app lost (``lost_iterations``) is
    redone by the next runner that ran the app, and counted for that job, as
    is what a runner redid after setting aside checkpoints that failed
    verification (``set_aside_iterations``).
    Seconds at the losing runner's pace (its useful time per iteration
    computed). A runner whose counter did not advance is left out: its
    whole time already counts as lost. The last runner redoes, it loses nothing."""
    by_job: dict[str, int] = {}
    seconds_by_job: dict[str, float] = {}
    unknown: list[str] = []
    for runner in runners:  # work past a checkpoint set aside at a runner's start: that runner redid it
        gap = set_aside_iterations(runner)
        if gap:
            by_job[runner.job_id] = by_job.get(runner.job_id, 0) + gap
            computed = gap + advance(runner)
            seconds_by_job[runner.job_id] = useful_seconds(runner) * min(1.0, gap / computed)
    for loser, redoer, lost in lost_and_redone(runners):
        if lost is None:
            unknown.append(str(loser.seq) if loser.seq is not None else loser.job_id)
            continue
        if lost == 0:
            continue
        job = redoer.job_id
        by_job[job] = by_job.get(job, 0) + lost
        computed = advance(loser) + lost
        seconds_by_job[job] = seconds_by_job.get(job, 0.0) + useful_seconds(loser) * lost / computed
    return Redone(
        sum(by_job.values()),
        sum(seconds_by_job.values()),
        by_job,
        restarts=0,
        source="runner records",
        unknown=tuple(unknown),
        seconds_by_job=seconds_by_job,
    )
