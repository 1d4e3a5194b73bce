"""Adaptive runner margin: learn how long the app needs to checkpoint.

Pure. The runner measures the time from its stop signal to the app's exit
and, when the counter lives in a file, when that file was last written
(``saved_at``): the checkpoint cost seen from outside. The next runner's
margin becomes max(configured floor, 2 x the slowest checkpoint seen + a few
seconds). A runner that had to be killed before its checkpoint was complete
at least doubles it, and its time from stop to kill counts as a lower bound
of what the app needs. An app that saved soon after the stop but exited
slowly gets a margin that covers its exit once, not twice over (``next_margin``).
It never shrinks, and never grows so far that the runner's start-up plus the
margin leave less than half the runner for work (``margin_cap``); when the
app's own stop does not fit in that, the chain says so at every runner
(``MarginStep.warning``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from chain.core.runner_rules import plan_schedule

SLACK_SECONDS = 5


@dataclass(frozen=True)
class MarginState:
    margin: int  # seconds before the runner's end to send the stop signal
    # the slowest the app took from the stop signal to a complete checkpoint:
    # its save when the counter's file tells, else its exit (a kill: a lower bound)
    worst_stop_to_exit: float = 0.0
    # the slowest runner start -> app start seen: the cap keeps the slowest
    # start-up plus the margin within half the runner (the worst, not the
    # last: a cap that followed each start-up's jitter would move the margin
    # down and up again from one runner to the next)
    worst_startup: float = 0.0


@dataclass(frozen=True)
class StopTimes:
    """What one runner's stop tells about the app, in seconds after the stop
    signal (``measured_stop``); None: not measured."""

    exited: float | None = None  # the app's exit; for a killed app the kill (a lower bound)
    saved: float | None = None  # its checkpoint complete: the counter written after the stop, before the exit
    killed: bool = False  # killed at the end of its grace (by the runner, or Slurm's TIMEOUT)

    @property
    def checkpointed(self) -> float | None:
        """When the checkpoint was known complete: its save, else its exit."""
        return self.saved if self.saved is not None else self.exited

    @property
    def killed_mid_save(self) -> bool:
        """Killed with no sign that its checkpoint was complete: work may be lost."""
        return self.killed and self.saved is None


@dataclass(frozen=True)
class MarginStep:
    state: MarginState
    why: str  # for the chain log when the margin changes
    warning: str = ""  # the app's stop does not fit in any margin the runner can give: said at every runner


def next_margin(
    state: MarginState, *, floor: int, runner_seconds: int, stop: StopTimes, startup: float | None = None
) -> MarginStep:
    """The margin for the next runner, why (for the chain log), and a
    warning when the app's stop does not fit.

    The save is covered twice over (a save that takes longer once loses the
    work since the last one). An exit after a complete save is covered once
    plus slack: a kill during it loses nothing of the checkpoint, but an app
    killed at every runner never runs its exit code (its run tracker, log
    flushes, lock files), and the records would call every runner "killed";
    covering it twice would take twice the exit from every runner's work.
    ``startup``: this runner's start -> app start (``startup_seconds``);
    the slowest seen bounds the margin (``margin_cap``).
    """
    worst = max(state.worst_stop_to_exit, stop.checkpointed or 0.0)
    startup = max(state.worst_startup, startup or 0.0)
    need, why = _save_need(state, floor, worst, stop)
    exit_need, exit_why = _exit_need(state, floor, stop)
    if exit_why and exit_need >= need:
        why = exit_why
    elif exit_why and stop.killed:
        why = f"{why}; {exit_why}"
    # never lower than before: what the app once needed it may need again
    wanted = max(state.margin, need, exit_need)
    cap = margin_cap(floor, runner_seconds, startup)
    if wanted > cap:
        # the cap never takes back a margin already given: a slow start-up
        # (a relay take-over riding out an outage) must not shrink it
        wanted = max(cap, state.margin)
        why += (
            f"; capped at {wanted}s: start-up {startup:.1f}s + margin leave half the {runner_seconds}s runner for work"
        )
    # killed before its checkpoint with the most a runner can give: it needs more than that
    cut = stop.killed_mid_save and state.margin >= cap
    warning = does_not_fit(
        worst, cap, runner_seconds=runner_seconds, startup=startup, cut=cut, killed_after=stop.exited
    )
    return MarginStep(MarginState(wanted, worst, startup), why, warning)


def _save_need(state: MarginState, floor: int, worst: float, stop: StopTimes) -> tuple[int, str]:
    """The margin the checkpoint needs: twice its slowest seen plus slack;
    after a kill before the checkpoint was complete, at least twice the last."""
    need = max(floor, math.ceil(2 * worst + SLACK_SECONDS) if worst else 0)
    why = f"worst stop-to-checkpoint {worst:.1f}s" if worst else "no stop measured yet"
    if stop.killed_mid_save:
        need = max(need, 2 * max(state.margin, floor))
        why = "the app was killed before it finished its checkpoint"
    return need, why


def _exit_need(state: MarginState, floor: int, stop: StopTimes) -> tuple[int, str]:
    """An exit after a complete save: covered once plus slack (the runner
    keeps at most 5 s of the margin for itself, ``plan_schedule``); killed
    while exiting, the time it was given is only a lower bound of its exit:
    at least double the margin, as for any kill, or it is killed at every runner."""
    if stop.saved is None or stop.exited is None:
        return 0, ""
    need = math.ceil(stop.exited + SLACK_SECONDS)
    if stop.killed:
        need = max(need, 2 * max(state.margin, floor))
        return need, (
            f"the app saved {stop.saved:.1f}s after the stop and was killed {stop.exited:.1f}s "
            "after it, still exiting: its checkpoint was complete, nothing was lost"
        )
    return need, (
        f"the app saved {stop.saved:.1f}s after the stop but exited {stop.exited:.1f}s after it: "
        "a slow exit, not a slow save"
    )


def margin_cap(floor: int, runner_seconds: int, startup: float) -> int:
    """The largest margin: start-up plus margin leave at least half the
    runner's time for work. Never below the configured ``floor`` (the
    user's own choice)."""
    return max(floor, math.floor(runner_seconds / 2 - startup))


def does_not_fit(
    worst: float, cap: int, *, runner_seconds: int, startup: float, cut: bool = False, killed_after: float | None = None
) -> str:
    """'' when the app's slowest stop fits in the time the largest margin
    gives it after the stop signal (``cut``: it was killed before its
    checkpoint with that margin, ``killed_after`` seconds after the stop); else the chain's warning, with the
    numbers and the fixes. Only the app's measured stop counts, not the
    doubled margin: a margin held below twice the stop still lets it save,
    and a runner that works half its time is no waste worth a warning."""
    plan = plan_schedule(0.0, runner_seconds, cap, None)
    grace = plan.kill_at - plan.stop_at
    if worst <= grace and not cut:
        return ""
    needed = max(math.ceil(2 * worst + SLACK_SECONDS), 2 * cap if cut else 0)  # a kill doubles
    runner = 2 * math.ceil(startup + needed)
    largest = f"margin {cap}s: start-up {startup:.1f}s + margin leave half the runner for work"
    if cut:
        when = f" {killed_after:.1f}s after the stop signal" if killed_after is not None else ""
        what = (
            f"the app was killed{when}, before its checkpoint was complete, "
            f"with the largest margin a {runner_seconds}s runner can give ({largest})"
        )
    else:
        what = (
            f"the app needs {worst:.1f}s after the stop signal to checkpoint but a {runner_seconds}s runner "
            f"can give it {grace:.1f}s ({largest}): it may be killed before its checkpoint at every runner"
        )
    return (
        f"{what}; use --runner-time {slurm_time(runner)} or longer (a {needed}s margin), a faster "
        "checkpoint, or --fixed-margin with a --runner-margin of your choice"
    )


def slurm_time(seconds: int) -> str:
    """``seconds`` as a ``--runner-time`` value (H:MM:SS)."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def startup_seconds(start: float | None, app_start: float | None) -> float | None:
    """A runner's start-up as its record tells: its start -> the app's start."""
    if start is None or app_start is None or app_start < start:
        return None
    return app_start - start


def measured_stop(
    *,
    stop_sent: float | None,
    kill_at: float | None,
    stop_to_exit: float | None,
    external_signal: str | None,
    killed: bool,
    timed_out: bool,
    saved_at: float | None = None,
    advanced: bool = False,
) -> StopTimes:
    """What one runner tells about the app's checkpoint time.

    Only a stop the runner itself sent counts (not scancel or preemption).
    For a killed app the time it was given (stop -> kill) is the lower bound
    of what it needs, not kill -> exit, which a hung app could stretch. The
    checkpoint was complete at ``saved_at`` (the counter file's mtime) when
    the counter advanced and that file was written after the stop and no
    later than the exit: the contract writes the counter after a durable
    checkpoint, so a kill after it lost nothing.
    """
    killed = killed or timed_out
    exited = stop_to_exit if stop_sent is not None and not external_signal else None
    if killed and exited is not None and kill_at is not None and stop_sent is not None:
        exited = min(exited, kill_at - stop_sent)
    saved = None
    if (
        exited is not None
        and stop_sent is not None
        and saved_at is not None
        and advanced
        and 0.0 <= saved_at - stop_sent <= exited
    ):
        saved = saved_at - stop_sent
    return StopTimes(exited=exited, saved=saved, killed=killed)
