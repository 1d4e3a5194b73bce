"""The kinds of reason the chain gives, beside the words it says them in.

A reason (a runner's judgment in ``runners.jsonl``, the chain's reason in
``state.json``) is prose for a person; its kind is what code reads: the
report counts the runners Slurm took back by kind, never by the words, so
the words may change freely. Stored by value: the member's name in lower
case.
"""

from __future__ import annotations

from chain.core.model import TextEnum


class ReasonKind(TextEnum):
    """What a reason says happened (the decision's rule that wrote it, in ``core.decision``)."""

    # the runner handed over to the next one
    HANDED_OVER = "handed_over"  # checkpointed, timed out, stopped at the deadline: the counter advanced
    NO_ADVANCE = "no_advance"  # it handed over but its counter did not advance
    NO_PROGRESS = "no_progress"  # too many runners in a row without progress: the chain stops
    NEVER_RAN = "never_ran"  # a pre-queued runner that left without running the app
    # Slurm took the allocation back: not a failure (``TAKEN_BACK``)
    PREEMPTED = "preempted"
    REQUEUED = "requeued"  # requeued after its end record: preempted, or a node failed
    LOST_NODE = "lost_node"  # requeued with one of its nodes down
    STALLED = "stalled"  # the watchdog stopped an app that showed no progress
    # the app's end
    FINISHED = "finished"  # the counter reached MAX_ITER
    FINISHED_SHORT = "finished_short"  # the app exited 0 below MAX_ITER
    # failures (retried while the retry budget lasts)
    DEADLINE_NO_ADVANCE = "deadline_no_advance"  # stopped at the deadline without checkpoint advance
    OUT_OF_MEMORY = "out_of_memory"
    NO_RECORD = "no_record"  # the runner ended without writing its record
    APP_FAILED = "app_failed"  # the app (or the runner) failed with an exit code
    # the chain's own reasons
    CANCELLED_BY_USER = "cancelled_by_user"  # its runner was cancelled outside chain (scancel)
    CANCELLED = "cancelled"  # chain cancel
    MARGIN_WARNING = "margin_warning"  # the app's stop does not fit in the runner's margin
    BAD_CHECKPOINT = "bad_checkpoint"  # the counter cannot be read: the chain stops, nothing is started on it
    SCHEDULER_UNREACHABLE = "scheduler_unreachable"  # Slurm did not answer through the job's patience
    HANDOVER_FAILED = "handover_failed"  # the submitter could not queue its successor
    CHAIN_DIR_UNWRITABLE = "chain_dir_unwritable"  # the chain directory refused writes
    UNKNOWN = "unknown"  # words of an earlier version that no kind matches

    @property
    def taken_back(self) -> bool:
        """Slurm took the runner's allocation back: the report names these runners, not as failures."""
        return self in TAKEN_BACK


TAKEN_BACK = frozenset({ReasonKind.PREEMPTED, ReasonKind.REQUEUED, ReasonKind.LOST_NODE})
