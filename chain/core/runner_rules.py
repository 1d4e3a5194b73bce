"""The runner's rules, pure: its timetable, its exit code from the app's,
what its job exits with for the scheduler, and its account of the app's end.

Exit contract (the seed's), as recorded in the runner's record: 0 all
iterations done; 99 app checkpointed voluntarily; 124 stopped at the deadline
with checkpoint advance; 1 stopped without advance; other codes passed
through. 75 (EX_TEMPFAIL) passes through. An app that exits after the
runner's own stop signal, with any code, is judged by its counter (see
``classify_exit``). The job itself exits 0 for the codes that hand over to
the next runner (see ``job_exit_code``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from chain.core.model import CONTINUE_CODES
from chain.primitives.codes import RunnerExit

STOPPED_ON_SIGNAL = "app stopped on the signal"  # the account of an app that exited when asked to stop


@dataclass(frozen=True)
class Schedule:
    """When the runner signals and, failing that, kills the app."""

    start: float
    end: float  # earlier of Slurm's end time and start + configured limit
    stop_at: float  # end - margin: the stop signal (CHAIN_DEADLINE)
    kill_at: float  # stop_at + grace: SIGKILL if the app still runs
    margin: int = 0  # the margin it was planned with
    slurm_end: float | None = None  # the scheduler's end time, when it told


def plan_schedule(start: float, limit: int, margin: int, slurm_end: float | None) -> Schedule:
    """Pure: the runner's timetable.

    The grace after the stop signal is the margin minus a small reserve, so
    the runner can still record the outcome before Slurm's own limit.
    """
    end = start + limit
    if slurm_end is not None and slurm_end < end:
        end = slurm_end
    reserve = min(5.0, margin / 4)
    stop_at = max(start, end - margin)
    kill_at = max(stop_at, end - reserve)
    return Schedule(start=start, end=end, stop_at=stop_at, kill_at=kill_at, margin=margin, slurm_end=slurm_end)


def promotion_give_up(now: float, patience: float, job_end: float, margin: float) -> float:
    """Pure: when a runner pre-queued by lookahead stops waiting to be
    promoted: after ``patience``, and no later than its own end minus its
    margin. Promoted after that, it could not run the app before its stop
    time anyway; and killed by its limit while waiting, it would leave no
    record and be judged a runner that timed out."""
    return min(now + patience, job_end - margin)


SURE_SHARE = 0.5  # a relay runner defers its successor when the chain's rest fits in this share of its app time


def app_pace(
    iter_before: int | None, iter_after: int | None, app_start: float | None, end: float | None
) -> float | None:
    """Pure: the iterations a second a runner's app made (the counter's
    advance from its start to the runner's end, the app's start-up and
    checkpoint included); None when its record does not tell (no advance,
    a time that is not a positive finite number, numbers past a float)."""
    if iter_before is None or iter_after is None or app_start is None or end is None:
        return None
    try:
        advance, seconds = float(iter_after - iter_before), float(end) - float(app_start)
    except OverflowError:
        return None
    if not (advance > 0 and math.isfinite(advance) and 0 < seconds < math.inf):
        return None
    return advance / seconds


def completes_here(counter: int, max_iter: int, pace: float | None, app_seconds: float) -> bool:
    """Pure: whether a relay runner starting its app at ``counter`` is sure
    enough to bring the chain to ``max_iter`` that it queues no successor
    before its app (``jobs.relay.Relay.take_over``): at its predecessor's
    ``pace`` the rest takes at most ``SURE_SHARE`` of its ``app_seconds``.
    A wrong guess costs the successor the queue wait it would have had
    meanwhile (the runner queues it at half its time, ``jobs.relay``)."""
    if pace is None or not (0 < app_seconds < math.inf) or not (0 < pace < math.inf):
        return False
    within = pace * app_seconds * SURE_SHARE
    return math.isfinite(within) and max_iter - counter <= within


def classify_exit(app_rc: int, we_stopped: bool, advanced: bool, *, reached_max: bool = False) -> int:
    """Pure: the runner's exit code from the app's and who stopped it.

    An app that exits after the runner's own stop signal stopped because it
    was asked to, whatever its code (an app that saves on SIGTERM and exits 0
    had not finished early, as the seed's ``timeout`` knew: 124). So its
    counter judges it: MAX_ITER reached -> done; advanced -> 124; else 1 (the
    seed's "stopped without advance", a failure). A crash while saving is told apart only by that
    counter: it did not advance, or the counter file is unreadable (the
    runner's exit 3); its exit code stays in the record (``app_exit_code``).
    A signal from outside (``we_stopped`` False; the runner counts an exit 0
    after one as stopped too) leaves the code as the app gave it: Slurm's
    state tells the rest.
    """
    if we_stopped:
        if reached_max:
            return RunnerExit.DONE
        return RunnerExit.TIMEOUT_ADVANCED if advanced else RunnerExit.NO_ADVANCE
    return app_rc


def job_exit_code(code: int) -> int:
    """Pure: what the runner job itself exits with, for Slurm.

    A runner that ended the way the contract intends (done, or checkpointed
    for the next runner: 99, 124, 75) exits 0, so Slurm shows it COMPLETED
    and ``--mail-type=FAIL`` does not mail at every handoff. The contract
    code stays in the runner's record, ``chain status`` and ``usage.csv``.
    """
    return 0 if code in (RunnerExit.DONE, *CONTINUE_CODES) else code


def exited_on_stop(stop_sent: bool, external: str | None, killed: bool, exit_code: int | None) -> bool:
    """Pure: the app exited by itself once the runner sent its stop signal
    (``exit_code`` None: a signal killed it): its counter judges it, and the
    runner's account says so (``describe_exit``; the record's ``stopped_on_signal``)."""
    return stop_sent and exit_code is not None and not external and not killed


def describe_exit(
    how: str,
    ran: float,
    stop_signal: str,
    stop_sent: bool,
    external: str | None,
    killed: bool,
    *,
    exit_code: int | None = None,
) -> str:
    """Pure: the runner's one-line account of how the app ended. ``how`` is
    ``supervise.AppEnd.how``; ``exit_code`` the app's exit status when it
    exited by itself (None: killed by a signal)."""
    if not stop_sent:  # the app ended on its own: done, or a failure
        if exit_code == RunnerExit.DONE:
            return f"app finished (exit 0) after {ran:.1f} s"
        return f"{how} after {ran:.1f} s, before the stop signal"
    if exited_on_stop(stop_sent, external, killed, exit_code):
        return f"{STOPPED_ON_SIGNAL} (exit {exit_code}) after SIG{stop_signal}"
    text = f"{how} after SIG{stop_signal}"
    if external:  # a signal name as Python spells it: SIGTERM
        text += f" (runner got {external})"
    return text + (" (killed after the grace period)" if killed else "")


LOOK_AHEAD = 5.0  # seconds before its stop signal a relay runner asks about its queued successor
LOOK_FRESH = 10.0  # seconds that answer stands for the check after the app


def successor_look_at(stop_at: float) -> float:
    """Pure: when a relay runner asks accounting whether its queued successor
    was cancelled outside chain: ``LOOK_AHEAD`` seconds before its app's stop
    signal. An app that stops on the signal, or a little before it as one
    that saves ahead of its deadline does, has exited by the time the answer
    is needed, and the job does not hold its slot waiting for slurmdbd."""
    return stop_at - LOOK_AHEAD


def look_fresh(asked: float, now: float) -> bool:
    """Pure: an answer asked at ``asked`` still stands at ``now`` for that
    check: it is at most ``LOOK_FRESH`` seconds old (the same race as a
    cancel just after a look at the app's end; an older one is asked again)."""
    return 0.0 <= now - asked <= LOOK_FRESH
