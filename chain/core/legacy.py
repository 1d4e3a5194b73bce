"""The kind of a reason written before kinds were stored (0.1.0's files).

The one place the chain reads a reason's words: a line of ``runners.jsonl``
(or a reason in ``state.json``) without a ``kind`` gets it here, once, as it
is read (``core.records``); everything after reads the kind. The words are
the ones chain wrote then, kept literally here on purpose: the decision's
current wording may change without changing how an old file reads.
"""

from __future__ import annotations

import re

from chain.core.reasons import ReasonKind

_RETRY = re.compile(r"retry \d+/\d+ after: ")  # a retried failure: the kind is the failure's
_COUNTER = r"-?\d+->-?\d+"

# In order: the first that matches names the kind (a stalled app's words also
# say "in a row without progress", a preempted runner's end in ": counter").
_WORDS: tuple[tuple[re.Pattern[str], ReasonKind], ...] = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        (r"runner cancelled by user", ReasonKind.CANCELLED_BY_USER),
        (r"cancelled by chain cancel", ReasonKind.CANCELLED),
        (r"margin does not fit", ReasonKind.MARGIN_WARNING),
        (r"scheduler unreachable \(", ReasonKind.SCHEDULER_UNREACHABLE),
        (r"could not submit the next submitter \(", ReasonKind.HANDOVER_FAILED),
        (r"cannot write the chain directory ", ReasonKind.CHAIN_DIR_UNWRITABLE),
        (r"runner left without running the app", ReasonKind.NEVER_RAN),
        (r"runner ran out of memory", ReasonKind.OUT_OF_MEMORY),
        (r"app finished at ", ReasonKind.FINISHED),
        (r"reached MAX_ITER=", ReasonKind.FINISHED),
        (r"app exited 0 but ", ReasonKind.FINISHED_SHORT),
        (r"runner preempted", ReasonKind.PREEMPTED),
        (r"runner requeued by Slurm", ReasonKind.REQUEUED),
        (r"runner lost node", ReasonKind.LOST_NODE),
        (r"app stalled", ReasonKind.STALLED),
        (r"no progress[: ]", ReasonKind.NO_PROGRESS),
        (r"the app was stopped at the deadline but ", ReasonKind.DEADLINE_NO_ADVANCE),
        (r"runner \S+ without a record \(", ReasonKind.NO_RECORD),
        (r".* runner \d+ in a row without progress, the chain stops at \d+$", ReasonKind.NO_ADVANCE),
        (rf".*: counter {_COUNTER}$", ReasonKind.HANDED_OVER),
        (r"runner failed with exit code ", ReasonKind.APP_FAILED),
        (rf".* \(runner exit code \S+, counter {_COUNTER}\)$", ReasonKind.APP_FAILED),
    )
)


def legacy_kind(reason: str) -> ReasonKind | None:
    """The kind of ``reason`` as an earlier chain worded it; UNKNOWN for words
    none of its rules wrote, None for no reason at all."""
    if not reason:
        return None
    if retried := _RETRY.match(reason):
        reason = reason[retried.end() :]
    return next((kind for words, kind in _WORDS if words.match(reason)), ReasonKind.UNKNOWN)
