"""Whether a site's per-user job limits leave room for a chain's jobs. Pure.

A chain holds, at its busiest moment, a known number of jobs in the queue:
submitter mode has its submitter, the runner and, at a handover (the
submitter's wall time, a step aside, a preemption), the successor submitter
(three), one more with ``--lookahead`` (the next runner is queued behind the
running one); relay mode has the running runner and its queued successor
(two). Running side by side, submitter mode needs two jobs (submitter and
runner), relay mode one. A limit below the queued need stalls the chain at
its first handover (the successor's ``sbatch`` is refused); a running limit
of one in submitter mode leaves the submitter and its runner to take turns,
which works only by stepping aside.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.settings import Mode


@dataclass(frozen=True)
class Limit:
    """One enforced per-user limit: its value and where it comes from
    (``association MaxSubmitJobs``, ``QOS normal MaxSubmitJobsPerUser``)."""

    value: int
    source: str


@dataclass(frozen=True)
class JobLimits:
    """The tightest enforced per-user limits on the jobs a chain submits:
    jobs queued or running (``queued``) and jobs running (``running``);
    None where there is none."""

    queued: Limit | None = None
    running: Limit | None = None


@dataclass(frozen=True)
class Room:
    """The verdict: ``refusal`` when the chain cannot run as asked (a
    one-line reason naming what would), ``warning`` when it runs slowly."""

    refusal: str | None = None
    warning: str | None = None


@dataclass(frozen=True)
class JobNeeds:
    """What one chain of a mode holds at its busiest (its driver says:
    ``chain.modes``): jobs queued or running at once, which ones (for the
    refusal), and jobs running side by side."""

    mode: Mode
    queued: int
    queued_what: str  # "at a handover (submitter, runner, successor)"
    running: int
    lookahead: bool = False


def room(needs: JobNeeds, least: JobNeeds, *, step_aside_after: int, limits: JobLimits | None) -> Room:
    """Whether ``limits`` leave room for one chain that ``needs`` so many
    jobs; ``least``: the mode that needs the fewest, named when it fits."""
    if limits is None:
        return Room()
    if limits.queued is not None and limits.queued.value < needs.queued:
        have = f"{limits.queued.source}={limits.queued.value}"
        if limits.queued.value < least.queued or needs == least:
            return Room(
                refusal=f"{have} leaves no room for a chain: it needs {least.queued} jobs queued at "
                f"once ({least.queued_what})"
            )
        what = " with --lookahead" if needs.lookahead else ""
        return Room(
            refusal=f"{have} leaves no room for {needs.mode.value} mode{what}: it needs {needs.queued} jobs queued "
            f"{needs.queued_what}; {least.mode.value} mode needs {least.queued}: use --mode {least.mode.value}"
        )
    if needs.running > least.running and limits.running is not None and limits.running.value < needs.running:
        have = f"{limits.running.source}={limits.running.value}"
        if step_aside_after <= 0:
            return Room(
                refusal=f"{have}: the submitter would hold the only job slot while its runner waits "
                f"for it; use --mode {least.mode.value} (or a --step-aside-after above 0)"
            )
        return Room(
            warning=f"{have}: the submitter and its runner cannot run at once, so they take turns "
            f"(the submitter steps aside after {step_aside_after}s each runner); --mode {least.mode.value} "
            "runs no submitter"
        )
    return Room()
