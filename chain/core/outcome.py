"""A runner's end as the decision sees it (``core.decision.Outcome``), from
the facts the jobs gather: its record when it wrote its end, else the
scheduler's account and the counter as it is. Pure: the gathering (the
record, the query, the counter read, the cancel request) is the caller's
(``jobs.watch.gather_outcome``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chain.core.decision import Outcome
from chain.core.model import JobState

if TYPE_CHECKING:  # records only: nothing here reads or asks
    from chain.core.model import JobInfo
    from chain.core.records import RunnerRecord
    from chain.core.status import ChainStatus

# The states in which the batch script itself exited: only then is Slurm's
# exit code the job's own. Slurm ended the others (NODE_FAIL, PREEMPTED,
# BOOT_FAIL, DEADLINE, TIMEOUT, a cancel) and prints 0 for them, or the
# signal's code: not an exit the runner ever had.
_OWN_EXIT_STATES = frozenset({JobState.COMPLETED, JobState.FAILED})


def slurm_exit_code(info: JobInfo | None) -> int | None:
    """Slurm's exit code for a runner that left no record, when it is the
    job's own; None (shown as no exit) when Slurm ended the job."""
    if info is None or info.state not in _OWN_EXIT_STATES:
        return None
    if info.signal and not info.exit_code:  # Slurm's 0:9: killed, as a shell reports it
        return 128 + info.signal
    return info.exit_code


def runner_outcome(
    status: ChainStatus,
    record: RunnerRecord | None,
    info: JobInfo | None,
    *,
    cancelled: bool,
    counter: int | None,
    missing_counter_file: str = "",
) -> Outcome:
    """The outcome of the chain's current runner. ``counter``: the counter as
    read now (None: unreadable); ``missing_counter_file``: the counter file's
    name when it is absent now, judged after the runner's app and before the
    next one's (a file the app never wrote, or removed)."""
    if record is not None and record.ended:
        return Outcome(
            exit_code=record.exit_code,
            slurm_state=info.state if info is not None and info.state.finished else None,
            iter_before=status.iter_before if record.iter_before is None else record.iter_before,
            iter_after=status.iter_before if record.iter_after is None else record.iter_after,
            recorded=True,
            cancelled_by_chain=cancelled,
            detail=record.detail,
            stopped_on_signal=record.stopped_on_signal,
            stop_signalled=record.stop_sent is not None,
            app_ran=not record.superseded,
            missing_counter_file=missing_counter_file,
            preempted=record.preempted,
            stalled=record.stalled,
            requeued=info is not None and info.state is JobState.REQUEUED,
        )
    return Outcome(
        exit_code=slurm_exit_code(info),
        slurm_state=info.state if info else JobState.UNKNOWN,
        iter_before=status.iter_before,
        iter_after=status.iter_before if counter is None else counter,
        recorded=False,
        cancelled_by_chain=cancelled,
        missing_counter_file=missing_counter_file,
    )
