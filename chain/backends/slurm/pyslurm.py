"""The pyslurm backend: Slurm's C API through pyslurm, behind the same interface.

Where it can be used at all is decided in ``pyslurm_load`` (pyslurm's
release must equal the running Slurm's).

pyslurm 25.11 API used here, as checked in pyslurm's source (repository
PySlurm/pyslurm, read through the code index; the docs site has the same
docstrings under https://pyslurm.github.io/):

- ``pyslurm/__init__.py``, ``pyslurm/version.py``: ``pyslurm.__version__``
  ("MAJOR.MINOR.PATCH", MAJOR.MINOR = Slurm's release) and ``pyslurm.version()``.
- ``pyslurm/core/job/submission.pyx`` / ``submission.pxd``:
  ``JobSubmitDescription(**attrs)``; attributes ``script`` (a path or the
  text; a path is read), ``name``, ``dependencies`` (str or dict),
  ``environment`` (``"ALL"`` or a dict: a dict is the job's whole environment
  plus the submitter's ``SLURM_*`` variables), ``working_directory``,
  ``time_limit``, ``standard_output``, ``standard_error``, ``partitions``...;
  ``load_sbatch_options(overwrite=False)`` reads the script's ``#SBATCH``
  lines into attributes still unset; ``submit()`` returns the new job id and
  raises ``RPCError``.
- ``pyslurm/core/job/sbatch_opts.pyx``: the ``#SBATCH`` parser behind
  ``load_sbatch_options`` (``-t/--time`` -> ``time_limit``, ``-o/--output``
  -> ``standard_output``, ``-J/--job-name`` -> ``name``, ``-d`` ->
  ``dependencies``...). It splits a line on ``=``/blanks and cannot take a
  quoted value with a blank in it: such a line raises ``ValueError``.
- ``pyslurm/core/job/job.pyx``: ``Job.load(job_id)`` (slurm_load_job; an id
  slurmctld no longer knows raises ``RPCError``, errno 2017
  ESLURM_INVALID_JOB_ID, "Invalid job id specified"); properties ``id``,
  ``name``, ``state`` (slurm_job_state_string: "RUNNING", "COMPLETED"...),
  ``state_reason``, ``exit_code``, ``exit_code_signal``, ``start_time``,
  ``end_time`` (epoch seconds or None; for a running job the scheduled end);
  ``Jobs.load()`` every job slurmctld holds (a map by id; ``.values()``);
  ``Job(id).cancel()`` = ``send_signal(9)`` = slurm_kill_job, which is what
  plain ``scancel`` does (slurmstepd sends TERM, then KILL after KillWait);
  ``Job(id).send_signal(sig, steps="batch")`` signals only the batch step
  (``scancel --batch --signal``), sig as a name ("SIGUSR1"/"USR1") or a
  number; ESLURM_ALREADY_DONE is ignored there.
- ``pyslurm/db/job.pyx``: ``pyslurm.db.JobFilter(ids=[...])`` and
  ``pyslurm.db.Jobs.load(filter)`` (slurmdb_jobs_get; jobs purged from
  slurmctld, and the accounting behind ``usage``); ``db.Job`` has ``id``,
  ``name``, ``state``, ``exit_code``, ``exit_code_signal``, ``submit_time``,
  ``start_time``, ``end_time``, ``elapsed_time`` (seconds), ``nodelist``,
  ``cpus`` (allocated), ``cancelled_by`` and ``stats``
  (``pyslurm/db/stats.pxd``: ``total_cpu_time`` in seconds,
  ``max_resident_memory`` in bytes).
- ``pyslurm/utils/helpers.pyx`` ``_get_exit_code``: like sacct, an exit
  status of 128 or more is reported minus 128 (137 -> 9); kept as reported,
  as the CLI backend keeps sacct's.
- ``pyslurm/core/error.pyx``: ``RPCError(Exception)`` with ``.errno`` and
  ``.msg`` (slurm_strerror text, e.g. "Socket timed out on send/recv
  operation"), so ``chain.core.retry.is_transient`` applies to its message.

pyslurm could not be installed on the machine this was written on (Slurm
22.05): this module is exercised there only up to the version check; the
contract suite (tests/backends/test_contract.py) runs it where it imports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from chain.backends.base import (
    AccountingUnavailable,
    Backend,
    JobInfo,
    JobUsage,
    submit_idempotently,
)
from chain.backends.slurm.pyslurm_load import load_pyslurm
from chain.core.model import JobState
from chain.core.retry import RetryPolicy, TransientError, is_transient
from chain.errors import SchedulerError

T = TypeVar("T")

ESLURM_INVALID_JOB_ID = 2017
_INVALID_ID_TEXT = "invalid job id"

# Variables a job inherits from its own allocation that must not leak into a
# job it submits (as in the CLI backend); pyslurm itself re-adds the
# submitter's SLURM_* variables to a dict environment, so only ours are
# filtered here.
_KEEP = {"SLURM_CONF"}


def _amount(value: Any) -> float | None:
    """A count or duration: a number >= 0, else None (unknown)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _num(value: Any) -> float | None:
    """A time: a number > 0, else None (pyslurm's 0 is "not set")."""
    return _amount(value) or None


def _job_usage(job: Any) -> JobUsage:
    """One ``pyslurm.db.Job`` as the report's accounting record."""
    stats = getattr(job, "stats", None)
    code = int(getattr(job, "exit_code", 0) or 0)
    sig = int(getattr(job, "exit_code_signal", 0) or 0)
    cpus, rss = _amount(getattr(job, "cpus", None)), _amount(getattr(stats, "max_resident_memory", None))
    return JobUsage(
        job_id=str(job.id), state=str(job.state or "UNKNOWN"), exit_code=f"{code}:{sig}",
        submit=_num(getattr(job, "submit_time", None)), start=_num(job.start_time),
        end=_num(job.end_time), elapsed=_amount(getattr(job, "elapsed_time", None)),
        cpu=_amount(getattr(stats, "total_cpu_time", None)),
        node=str(getattr(job, "nodelist", "") or ""),
        max_rss=None if rss is None else int(rss), alloc_cpus=None if cpus is None else int(cpus),
    )


def _values(collection: Any) -> Iterable[Any]:
    """pyslurm collections: a map by id (``.values()``) or a plain list."""
    values = getattr(collection, "values", None)
    return values() if callable(values) else collection  # type: ignore[no-any-return]


class PyslurmBackend(Backend):
    """Talks to Slurm through pyslurm (Slurm's C API).

    ``module``/``slurm_version`` are for tests: a stand-in for pyslurm and the
    version the running Slurm would report.
    """

    name = "pyslurm"
    usage_source = "pyslurm.db"

    def __init__(
        self, retry: RetryPolicy | None = None, *, module: ModuleType | None = None,
        slurm_version: str | None = None,
    ) -> None:
        self.pyslurm, self.version, self.slurm_version = load_pyslurm(module, slurm_version)
        self.retry = retry or RetryPolicy()

    # --- plumbing ------------------------------------------------------------
    def _is_rpc_error(self, exc: BaseException) -> bool:
        rpc = getattr(self.pyslurm, "RPCError", None)
        return isinstance(rpc, type) and isinstance(exc, rpc)

    @staticmethod
    def _invalid_id(exc: BaseException) -> bool:
        return (getattr(exc, "errno", None) == ESLURM_INVALID_JOB_ID
                or _INVALID_ID_TEXT in str(exc).lower())

    def _once(self, what: str, fn: Callable[[], T]) -> T:
        """One pyslurm call; RPCError -> TransientError / SchedulerError."""
        try:
            return fn()
        except Exception as exc:
            if not self._is_rpc_error(exc):
                raise
            message = str(getattr(exc, "msg", None) or exc).replace("\n", " ")
            if is_transient(message):
                raise TransientError(f"pyslurm {what}: {message}") from exc
            raise SchedulerError(f"pyslurm {what} failed: {message[:300]}") from exc

    def _retrying(self, what: str, fn: Callable[[], T]) -> T:
        """A pyslurm call under the one retry policy (chain.core.retry)."""
        return self.retry.call(lambda: self._once(what, fn))

    def _load(self, job_id: str) -> Any | None:
        """The controller's record of one job; None once slurmctld forgot it."""
        def attempt() -> Any | None:
            try:
                return self._once("Job.load", lambda: self.pyslurm.Job.load(int(job_id)))
            except SchedulerError as exc:
                if self._invalid_id(exc.__cause__ or exc):
                    return None
                raise
        return self.retry.call(attempt)

    def _info(self, job: Any, source: str) -> JobInfo:
        state = JobState.parse(str(job.state or "UNKNOWN"))
        exit_code: int | None = None
        sig: int | None = None
        if state.finished:
            exit_code = int(job.exit_code or 0)
            sig = int(getattr(job, "exit_code_signal", 0) or 0) or None
        cancelled = getattr(job, "cancelled_by", None) if state is JobState.CANCELLED else None
        return JobInfo(
            job_id=str(job.id),
            state=state,
            exit_code=exit_code,
            signal=sig,
            reason=str(getattr(job, "state_reason", "") or ""),
            name=str(job.name or ""),
            start=_num(job.start_time),
            end=_num(job.end_time),
            cancelled_by=str(cancelled) if cancelled else None,
            source=source,
        )

    # --- Backend -------------------------------------------------------------
    def submit(
        self, script: Path, *, job_name: str, dependency: str | None = None,
        env: Mapping[str, str] | None = None, cwd: Path | None = None,
    ) -> str:
        script = Path(script)
        if not script.is_file():
            raise SchedulerError(f"pyslurm submit: cannot read {script}")
        environment = {k: v for k, v in os.environ.items()
                       if k in _KEEP or not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
        environment.update(env or {})
        workdir = str(Path(cwd if cwd is not None else os.getcwd()).absolute())

        def describe() -> Any:
            # Values given here win over the script's #SBATCH lines
            # (load_sbatch_options(overwrite=False)), as sbatch's flags do.
            desc = self.pyslurm.JobSubmitDescription(
                script=str(script.absolute()), name=job_name, environment=environment,
                working_directory=workdir,
            )
            if dependency:
                desc.dependencies = dependency
            try:
                desc.load_sbatch_options(overwrite=False)
            except ValueError as exc:
                raise SchedulerError(f"pyslurm cannot read the #SBATCH lines of {script}: "
                                     f"{exc}") from None
            # sbatch resolves relative output paths against the working dir.
            for attr in ("standard_output", "standard_error"):
                value = getattr(desc, attr, None)
                if value and not os.path.isabs(str(value)):
                    setattr(desc, attr, os.path.join(workdir, str(value)))
            return desc

        return submit_idempotently(
            self, job_name, lambda: str(self._once("submit", lambda: describe().submit())),
            retry=self.retry)

    def query(self, job_ids: Sequence[str]) -> dict[str, JobInfo]:
        found: dict[str, JobInfo] = {}
        gone: list[str] = []
        for job_id in (j for j in job_ids if j):
            job = self._load(job_id)
            if job is None:
                gone.append(job_id)
            else:
                found[job_id] = self._info(job, "pyslurm")
        if gone:
            found.update(self._from_accounting(gone))
        return found

    def _from_accounting(self, ids: list[str]) -> dict[str, JobInfo]:
        db = getattr(self.pyslurm, "db", None)
        if db is None:
            return {}
        try:
            jobs = self._retrying("db.Jobs.load", lambda: db.Jobs.load(
                db.JobFilter(ids=[int(j) for j in ids])))
        except SchedulerError:
            return {}  # accounting disabled or down: as the CLI backend, no entry
        result: dict[str, JobInfo] = {}
        for job in _values(jobs):
            job_id = str(job.id)
            if job_id in ids:
                result[job_id] = self._info(job, "pyslurm.db")
        return result

    def find_by_name(self, job_name: str) -> list[str]:
        jobs = self._retrying("Jobs.load", lambda: self.pyslurm.Jobs.load())
        ids = {str(job.id) for job in _values(jobs) if job.name == job_name}
        return sorted(ids, key=int)

    def cancel(self, job_id: str, *, signal: str | None = None, steps_only: bool = False) -> None:
        def attempt() -> None:
            try:
                job = self.pyslurm.Job(int(job_id))
                if signal:
                    name = signal.strip().upper()
                    sig: int | str = int(name) if name.isdigit() else (
                        name if name.startswith("SIG") else "SIG" + name)
                    # pyslurm: steps="children" is every step but the batch one
                    target = "children" if steps_only else "batch"
                    self._once("send_signal", lambda: job.send_signal(sig, steps=target))
                else:
                    self._once("cancel", lambda: job.cancel())
            except SchedulerError as exc:
                # As scancel: an id slurmctld no longer knows is nothing to do.
                if not self._invalid_id(exc.__cause__ or exc):
                    raise
        self.retry.call(attempt)

    def end_time(self, job_id: str) -> float | None:
        job = self._load(job_id)
        if job is None:
            return None
        info = self._info(job, "pyslurm")
        if info.state not in (JobState.RUNNING, JobState.COMPLETING):
            return None
        return info.end

    def usage(self, job_ids: Sequence[str]) -> dict[str, JobUsage]:
        """slurmdbd's records through ``pyslurm.db``, in one request."""
        db = getattr(self.pyslurm, "db", None)
        if db is None:
            raise AccountingUnavailable(f"pyslurm {self.version} has no accounting API (pyslurm.db)")
        ids = [j for j in dict.fromkeys(job_ids) if j]
        if not ids:
            return {}
        try:
            jobs = self._retrying("db.Jobs.load", lambda: db.Jobs.load(
                db.JobFilter(ids=[int(j) for j in ids])))
        except SchedulerError as exc:
            raise AccountingUnavailable(str(exc)) from None
        found = (_job_usage(job) for job in _values(jobs))
        return {u.job_id: u for u in found if u.job_id in ids}

    def available(self) -> bool:
        # The constructor already imported pyslurm and matched its release
        # with the running Slurm; one cheap RPC says the controller answers.
        try:
            self._once("Job.load", lambda: self.pyslurm.Jobs.load())
        except SchedulerError:
            return False
        return True
