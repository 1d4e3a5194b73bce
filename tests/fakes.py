"""The one fake backend of the unit tests: a complete ``Backend`` that
records what the chain asks of the scheduler, with no scheduler behind it.

Submits get ids 101, 102, ...; a job is PENDING until the test sets its
state (``set_state``) or cancels it (CANCELLED). Pass it to the library with
``backend=`` (``chain.api`` takes it the way the CLI takes ``--backend``).
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from chain.backends.base import Backend, JobInfo, JobState
from chain.core.events import Event
from chain.core.limits import JobLimits
from chain.effects.executor import Executor
from chain.errors import SchedulerError
from chain.store import ChainStatus


class FakeBackend(Backend):
    """Records submissions and cancellations; answers queries from its table."""

    name = "slurm"
    cheap_queries = False

    def __init__(self, *, first_id: int = 101) -> None:
        self.next_id = first_id
        self.submitted: list[tuple[str, str | None]] = []  # (job name, dependency)
        self.cancelled: list[str] = []
        self.signalled: list[tuple[str, str]] = []
        self.states: dict[str, JobInfo] = {}
        self.names: dict[str, list[str]] = {}
        self.queries = 0
        self.asked_exit_codes: list[bool] = []  # each query's exit_codes
        self.end_time_calls = 0
        self.job_end: float | None = None  # what end_time answers (None: it cannot say)
        self.preempted: set[str] = set()  # jobs Slurm is preempting (scontrol's PreemptTime set)
        self.limits: JobLimits | None = None  # the site's enforced per-user job limits
        self.limits_asked: list[tuple[str, str, str]] = []  # (account, qos, partition) of each ask
        self.released: list[str] = []  # jobs whose dependency was dropped
        self.excluded: list[tuple[str, ...]] = []  # each submission's excluded nodes
        self.down: set[str] = set()  # nodes shown down
        self.node_queries = 0  # down_nodes calls (sinfo)

    def submit(
        self,
        script: Path,
        *,
        job_name: str,
        dependency: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        exclude: Sequence[str] = (),
    ) -> str:
        self.excluded.append(tuple(exclude))
        job_id = str(self.next_id)
        self.next_id += 1
        self.submitted.append((job_name, dependency))
        self.names.setdefault(job_name, []).append(job_id)
        self.states[job_id] = JobInfo(job_id, JobState.PENDING, name=job_name)
        return job_id

    def down_nodes(self, nodes: Sequence[str]) -> set[str]:
        self.node_queries += 1
        return self.down & set(nodes)

    def release(self, job_id: str) -> None:
        self.released.append(job_id)

    def job_limits(self, *, account: str = "", qos: str = "", partition: str = "") -> JobLimits | None:
        self.limits_asked.append((account, qos, partition))
        return self.limits

    def set_state(self, job_id: str, state: JobState, exit_code: int | None = None) -> None:
        old = self.states.get(job_id)
        self.states[job_id] = JobInfo(job_id, state, name=old.name if old else "", exit_code=exit_code)

    def forget(self, job_id: str) -> None:
        """The scheduler no longer knows the job (purged)."""
        self.states.pop(job_id, None)

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        self.queries += 1
        self.asked_exit_codes.append(exit_codes)
        # without exit codes an ended job's may be missing (the Slurm CLI's
        # squeue has none): the caller must not need it
        return {
            j: self.states[j]
            if exit_codes or not self.states[j].state.finished
            else dataclasses.replace(self.states[j], exit_code=None)
            for j in job_ids
            if j in self.states
        }

    def find_by_name(self, job_name: str) -> list[str]:
        return list(self.names.get(job_name, []))

    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        if signal is not None:
            self.signalled.append((job_id, signal))
            return
        self.cancelled.append(job_id)
        if job_id in self.states:
            self.set_state(job_id, JobState.CANCELLED)

    def scheduler_end(self, job_id: str) -> float | None:
        self.end_time_calls += 1
        return self.job_end

    def preempting(self, job_id: str, *, restarts: int = 0) -> bool:
        return job_id in self.preempted


class FailingSubmits(FakeBackend):
    """Refuses every sbatch once ``refuse`` is set (what came before, e.g.
    ``chain submit``'s, goes through); counts the attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = False
        self.submit_calls = 0

    def submit(self, script: Path, **kwargs: Any) -> str:
        self.submit_calls += 1
        if self.refuse:
            raise SchedulerError("sbatch: error: Batch job submission failed: QOSMaxSubmitJobPerUserLimit")
        return super().submit(script, **kwargs)


def sigint_default() -> None:
    """In the child: SIGINT back to its default. A test run started in the
    background by a non-interactive shell (as CI may be) inherits SIGINT
    ignored, and Python then never turns ^C into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class SteppingClock:
    """Time that moves only when the code under test sleeps (or the test
    moves ``now``): pass the instance (or its ``clock``) as ``clock`` and its
    ``sleep`` as ``sleep``; no test really waits. ``slept`` lists the sleeps
    asked for; ``min_step`` makes each sleep advance at least that much (a
    0.1 s poll would make a two-minute wait 1200 looks)."""

    def __init__(self, now: float = 0.0, *, min_step: float = 0.0) -> None:
        self.now = now
        self.min_step = min_step
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def clock(self) -> float:
        """The time, for code that takes a bound method."""
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(seconds, self.min_step)


def spy_on_executors(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Executor, str]]:
    """Every event any ``Executor`` applies from here on, with the executor
    that applied it (held, so two executors never share an ``id``)."""
    applied: list[tuple[Executor, str]] = []
    apply = Executor.apply

    def spy(self: Executor, status: ChainStatus, *events: Event) -> ChainStatus:
        applied.extend((self, type(event).__name__) for event in events)
        return apply(self, status, *events)

    monkeypatch.setattr(Executor, "apply", spy)
    return applied
