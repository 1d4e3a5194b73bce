"""``state.json``: the chain's current state, one typed record."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.core import names
from chain.core.events import Event
from chain.core.model import ChainState
from chain.core.reasons import ReasonKind
from chain.errors import ChainDirError
from chain.primitives.codec import TRANSIENT, RecordError, decode, encode

STATE_VERSION = 1
# what ends up in scripts and scheduler commands: nothing that leaves its
# line or its argument (a chain id is a job-name prefix plus "-" and hex)
# (nor a path: the id names the directory an ended chain is kept in, chain submit --new)
CHAIN_ID = re.compile(r"(?!\.\.?$)[^\s/\x00-\x1f\x7f]{1,80}")
JOB_ID = re.compile(f"({names.JOB_ID.pattern})?")  # "" while none


@dataclass
class ChainStatus:
    """``state.json``: the chain's current state, owned by the submitter."""

    chain_id: str
    state: ChainState = ChainState.PENDING
    reason: str = ""
    reason_kind: ReasonKind | None = None  # what ``reason`` says, for code (None: no reason, or not told)
    created: float = 0.0
    updated: float = 0.0
    workdir: str = ""
    backend: str = ""
    submitter_cycle: int = 0
    submitter_job_id: str = ""
    runner_seq: int = 0  # sequence number of the current/last runner
    runner_job_id: str = ""  # "" while being submitted
    runner_live: bool = False  # the current runner has not been judged yet
    runner_submitted: float = 0.0
    iter_before: int = 0  # counter when the current runner was submitted
    no_progress: int = 0
    retries_used: int = 0
    iteration: int = 0  # last counter the submitter read
    next_job_id: str = ""  # lookahead / relay: the next runner, queued behind the current one
    relay_broken: str = ""  # relay: why the successor could not be queued (the chain stalls)
    margin: int = 0  # adaptive runner margin (0: the configured one)
    worst_stop_to_exit: float = 0.0  # slowest stop signal -> checkpoint complete (its save, else its exit) seen
    worst_startup: float = 0.0  # slowest runner start -> app start seen: it bounds the adaptive margin
    hooks: list[dict[str, Any]] = field(default_factory=list)
    node_strikes: dict[str, int] = field(default_factory=dict)  # failed or stalled runners put on a node
    excluded_nodes: list[str] = field(default_factory=list)  # left out of later runners (sbatch --exclude)
    end_announced: bool = False  # --notify / --mail-user ran for this end (reset on resume)
    completed_at: float = 0.0
    version: int = STATE_VERSION
    revision: int = 0  # one more at every save: a writer that finds another number re-applies its events
    # the events applied to this copy since it was last saved or read (the
    # executor's compare-and-save applies them again over a newer state.json)
    unsaved: list[Event] = field(default_factory=list, compare=False, repr=False, metadata=TRANSIENT)

    def to_json(self) -> dict[str, Any]:
        return encode(self)

    def runner_jobs(self) -> list[str]:
        """The chain's runner jobs that may still run: its live runner, and
        the one queued behind it (lookahead, relay)."""
        return [i for i in (self.runner_job_id if self.runner_live else "", self.next_job_id) if i]

    def live_jobs(self) -> list[str]:
        """The jobs that drive the chain as this record names them: its
        submitter, then ``runner_jobs``. The one list every view and
        command asks the scheduler about."""
        return [i for i in (self.submitter_job_id, *self.runner_jobs()) if i]

    def named_jobs(self) -> list[str]:
        """Every job the record names, live or just ended: its submitter, its
        runner (also once judged) and the one queued behind it. The jobs that
        may still write into the chain directory after it ended."""
        return list(dict.fromkeys(i for i in (self.submitter_job_id, self.runner_job_id, self.next_job_id) if i))

    def queued_next(self, job_id: str, seq: int | None) -> bool:
        """``job_id``, runner ``seq``, is the one queued behind the current
        runner (lookahead's pre-queued runner, relay's successor): the one
        rule by which such a job knows it is the chain's next."""
        return bool(self.next_job_id) and self.next_job_id == job_id and seq == self.runner_seq + 1

    @classmethod
    def from_json(cls, data: Any, path: Path) -> ChainStatus:
        """Validated to every field's type; a newer format is refused. A
        JSON value chain never writes (not an object, or no ``chain_id``: the
        app's own ``state.json``, say) is not chain's, and not called corrupt."""
        if not isinstance(data, dict) or "chain_id" not in data:
            why = "not a JSON object" if not isinstance(data, dict) else "no chain_id"
            raise ChainDirError(f"{path.parent} is not a chain directory: its state.json is not chain's ({why})")
        try:
            status = decode(cls, data)
        except RecordError as exc:
            raise ChainDirError(f"state file {path} is corrupt: {exc}") from None
        if "reason_kind" not in data and status.reason:  # written before kinds: read once from its words
            from chain.core.legacy import legacy_kind  # only for 0.1.0's files: not in every job's start

            status.reason_kind = legacy_kind(status.reason)
        if not status.chain_id:
            raise ChainDirError(f"state file {path} is corrupt: no chain_id")
        problem = _hostile(status)
        if problem:
            raise ChainDirError(f"state file {path} is corrupt: {problem}")
        if status.version > STATE_VERSION:
            raise ChainDirError(
                f"state file {path} has format {status.version}, newer than this chain "
                f"understands ({STATE_VERSION}): upgrade chain"
            )
        return status


def _hostile(status: ChainStatus) -> str:
    """What in a decoded status must not reach a script or a scheduler command."""
    if not CHAIN_ID.fullmatch(status.chain_id):
        return f"bad chain_id {status.chain_id!r}"
    for name in ("submitter_job_id", "runner_job_id", "next_job_id"):
        if not JOB_ID.fullmatch(getattr(status, name)):
            return f"bad {name} {getattr(status, name)!r}"
    return ""
