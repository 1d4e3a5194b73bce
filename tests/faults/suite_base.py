"""The fault suite's shared state and helpers (see driver.py): the seeded
moments, the report, the chain under test, the Slurm call log and the queue
sampler; waiting for a quiet cluster and for progress."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from chain_view import Chain
from evidence import (
    LIVE_STATES,
    Call,
    Sampler,
    SlurmCalls,
    node_name,
    squeue_rows,
)
from schedule import Report


class SuiteBase:
    """What every family of faults uses (app_faults, slurm_faults,
    command_faults); ``driver.Suite`` puts them together."""

    def __init__(
        self, seed: int, scale: str, workdir: Path, only: tuple[str, ...] = (), mode: str = "submitter"
    ) -> None:
        self.only = only
        self.mode = mode
        self.relay = mode == "relay"
        self.rng = random.Random(seed)
        self.report = Report(seed, scale)
        self.long = scale == "long"
        self.node = node_name()
        # development knobs (to show that a weakened setting fails the suite):
        # FAULT_SUITE_MAX_ITER, FAULT_SUITE_SAVE_DELAY, FAULT_SUITE_CHAIN_ARGS
        # (more `chain submit` arguments)
        self.max_iter = int(os.environ.get("FAULT_SUITE_MAX_ITER", "3600" if self.long else "2000"))
        self.calls = SlurmCalls(workdir)
        self.chain = Chain(
            workdir,
            {
                "ITER_SECONDS": "0.1",
                "FAULT_SAVE_DELAY": os.environ.get("FAULT_SUITE_SAVE_DELAY", "0.4"),
                "FAULT_PACE_FILE": str(workdir / "pace"),
            },
            self.max_iter,
        )
        self.sampler: Sampler | None = None
        self.pace = 0.25  # seconds per iteration while faults are injected
        self.cluster_disturbed = False
        self.races = 0  # racing commands fired so far (their call-log tags)

    # -- helpers
    def delay(self, lo: float, hi: float) -> float:
        return round(self.rng.uniform(lo, hi), 2)

    @property
    def s(self) -> Sampler:
        assert self.sampler is not None
        return self.sampler

    def wait_quiet_cluster(self, limit: float = 1200) -> None:
        """Disruptive faults only when no other jobs are on the cluster (the
        chain is slowed down meanwhile, so it does not finish first)."""
        start = time.time()
        slowed = False
        try:
            self._wait_quiet(start, limit, lambda: None if slowed else self.chain.set_pace(1.0))
            slowed = True
        finally:
            self.chain.set_pace(self.pace)

    def _wait_quiet(self, start: float, limit: float, slow: Callable[[], None]) -> None:
        announced = False
        while True:
            rows = squeue_rows() or []
            others = sorted({n for _, n, s in rows if not n.startswith(self.chain.chain_id + ".") and s in LIVE_STATES})
            if not others:
                return
            if time.time() - start > limit:
                self.report.note(f"cluster still busy after {limit:.0f}s ({others[:3]}); going ahead")
                return
            if not announced:
                announced = True
                slow()
                self.report.note(f"waiting for other jobs to leave the cluster before a disruptive fault: {others[:3]}")
            time.sleep(5)

    def progress_after(self, counter: int, timeout: float) -> int:
        """Wait until the committed checkpoint (the app's log) passes
        ``counter`` (the chain goes on); returns the new value."""
        return int(
            self.chain.wait(
                f"a checkpoint beyond {counter}", lambda: (c := self.chain.committed()) > counter and c, timeout
            )
        )

    def chain_calls(self, since: float, until: float = float("inf")) -> list[Call]:
        return [c for c in self.calls.calls() if c.start >= since and c.start <= until]
