"""Adaptive runner margin: learn how long the app needs to checkpoint.

Pure. The runner measures the time from its stop signal to the app's exit
(the checkpoint cost seen from outside); the next runner's margin becomes
max(configured floor, 2 x the worst seen + a few seconds). A runner that
had to be killed before it finished at least doubles it, and its time from
stop to kill counts as a lower bound of what the app needs. It never shrinks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SLACK_SECONDS = 5


@dataclass(frozen=True)
class MarginState:
    margin: int  # seconds before the runner's end to send the stop signal
    worst_stop_to_exit: float = 0.0


def next_margin(
    state: MarginState,
    *,
    floor: int,
    runner_seconds: int,
    stop_to_exit: float | None,
    killed: bool,
) -> tuple[MarginState, str]:
    """The margin for the next runner, and why (for the chain log).

    ``stop_to_exit`` is the measured stop signal -> app exit; for a killed
    app (``killed``) it is the time it was given, which it needed more than.
    Never below the configured ``floor``, never above half the runner's
    time (the app must still get to compute).
    """
    worst = state.worst_stop_to_exit
    if stop_to_exit is not None and stop_to_exit > worst:
        worst = stop_to_exit
    # never lower than before: what the app once needed it may need again
    wanted = max(floor, state.margin, math.ceil(2 * worst + SLACK_SECONDS) if worst else 0)
    why = f"worst stop-to-exit {worst:.1f}s" if worst else "no stop measured yet"
    if killed:
        wanted = max(wanted, 2 * max(state.margin, floor))
        why = "the app was killed before it finished its checkpoint"
    cap = max(floor, runner_seconds // 2)
    if wanted > cap:
        wanted = cap
        why += f"; capped at half the runner time, {cap}s"
    return MarginState(margin=wanted, worst_stop_to_exit=worst), why


def measured_stop(*, stop_sent: float | None, kill_at: float | None, stop_to_exit: float | None,
                  external_signal: str | None, killed: bool, timed_out: bool) -> tuple[float | None, bool]:
    """What one runner tells about the app's checkpoint time: (seconds, killed).

    Only a stop the runner itself sent counts (not scancel or preemption).
    For a killed app the time it was given (stop -> kill) is the lower bound
    of what it needs, not kill -> exit, which a hung app could stretch.
    """
    killed = killed or timed_out
    measured = stop_to_exit if stop_sent is not None and not external_signal else None
    if killed and measured is not None and kill_at is not None and stop_sent is not None:
        measured = min(measured, kill_at - stop_sent)
    return measured, killed
