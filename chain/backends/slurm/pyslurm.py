"""The pyslurm backend: Slurm's C API through pyslurm, behind the same interface.

Where it can be used is decided in ``pyslurm_load`` (pyslurm's major.minor
must be the running Slurm's). It uses the object API pyslurm 22.5 through
25.11 share (read in their ``core/job/{job,submission}.pyx``, ``db/job.pyx``,
``core/error.pyx``): ``JobSubmitDescription(**attrs).submit()``,
``Job.load(id)`` (an id slurmctld forgot: ``RPCError`` errno 2017),
``Jobs.load()`` (a map by cluster and id: ``.values()``), ``Job(id).cancel()``
(= plain scancel), ``Job(id).send_signal(sig, steps=...)``,
``db.Jobs.load(db.JobFilter(ids=...))`` (slurmdbd); ``RPCError.msg`` is
slurm_strerror's text, so ``chain.core.retry.is_transient`` applies.

What a real pyslurm (22.5.3 on Slurm 22.05.8) showed, handled for all:
``load_sbatch_options`` is not used, since its reader maps ``--partition``
to an attribute the description lacks (AttributeError, in 24.11 too), takes
no quoted value nor one holding ``=`` or ``#``, and silently drops options
it does not know; the leading ``#SBATCH`` block is read here as sbatch
reads it and each option set on the attribute the installed pyslurm has, or
refused in one line. A time given as a digit string fails in
``timestr_to_mins`` (TypeError): times go as whole minutes. pyslurm adds the
submitting process's ``SLURM_*`` variables to a dict environment, as sbatch
does (the command-line backend drops them); Slurm overrides the ones that
describe the new job.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from chain.backends.base import (
    AccountingUnavailable,
    Backend,
    JobInfo,
    JobUsage,
    submit_idempotently,
)
from chain.backends.slurm.parse import preempting
from chain.backends.slurm.pyslurm_load import load_pyslurm
from chain.backends.slurm.pyslurm_options import ATTRS, sbatch_directives
from chain.core.model import JobState
from chain.core.retry import RetryPolicy, TransientError, is_transient
from chain.errors import SchedulerError
from chain.primitives.signals import signal_named

if TYPE_CHECKING:  # what only a submission asks: loaded there, not in every job
    from chain.core.limits import JobLimits

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
        job_id=str(job.id),
        state=str(job.state or "UNKNOWN"),
        exit_code=f"{code}:{sig}",
        submit=_num(getattr(job, "submit_time", None)),
        start=_num(job.start_time),
        end=_num(job.end_time),
        elapsed=_amount(getattr(job, "elapsed_time", None)),
        cpu=_amount(getattr(stats, "total_cpu_time", None)),
        node=str(getattr(job, "nodelist", "") or ""),
        max_rss=None if rss is None else int(rss),
        alloc_cpus=None if cpus is None else int(cpus),
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
        self,
        retry: RetryPolicy | None = None,
        *,
        module: ModuleType | None = None,
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
        return getattr(exc, "errno", None) == ESLURM_INVALID_JOB_ID or _INVALID_ID_TEXT in str(exc).lower()

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
        self,
        script: Path,
        *,
        job_name: str,
        dependency: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        exclude: Sequence[str] = (),
    ) -> str:
        script = Path(script)
        try:
            options = sbatch_directives(script.read_text(), script)
        except OSError as exc:
            raise SchedulerError(f"pyslurm submit: cannot read {script}: {exc.strerror}") from None
        environment = {
            k: v for k, v in os.environ.items() if k in _KEEP or not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))
        }
        environment.update(env or {})
        # As sbatch run in cwd: the script's --chdir wins, relative paths are
        # the working directory's; the job name and dependency given here win
        # over the script's, as sbatch's flags do.
        here = str(Path(cwd if cwd is not None else os.getcwd()).absolute())
        workdir = options["chdir"] = os.path.join(here, str(options.get("chdir", here)))
        options["job-name"] = job_name
        if dependency:
            options["dependency"] = dependency
        if exclude:
            options["exclude"] = ",".join(exclude)
        for name in ("output", "error"):
            if name in options and not os.path.isabs(str(options[name])):
                options[name] = os.path.join(workdir, str(options[name]))

        attrs = self._attributes(options, script)  # refused here, not retried

        def submit_once() -> str:
            desc = self.pyslurm.JobSubmitDescription(script=str(script.absolute()), environment=environment, **attrs)
            try:
                return str(self._once("submit", desc.submit))
            except (ValueError, TypeError) as exc:  # pyslurm's checks of the values
                raise SchedulerError(f"pyslurm cannot submit {script}: {exc}") from None

        return submit_idempotently(self, job_name, submit_once, retry=self.retry)

    def _attributes(self, options: Mapping[str, Any], script: Path) -> dict[str, Any]:
        """sbatch options as the installed pyslurm's description attributes."""
        has = set(dir(self.pyslurm.JobSubmitDescription()))
        attrs: dict[str, Any] = {}
        for name, value in options.items():
            candidates = ATTRS.get(name, (name.replace("-", "_"),))
            attr = next((a for a in candidates if a in has), None)
            if attr is None:
                raise SchedulerError(
                    f"pyslurm {self.version} has no setting for #SBATCH --{name} of {script} — use --backend slurm"
                )
            attrs[attr] = value
        return attrs

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
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
            jobs = self._retrying("db.Jobs.load", lambda: db.Jobs.load(db.JobFilter(ids=[int(j) for j in ids])))
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
                    named = signal_named(signal, numbers=True)
                    if named is None:
                        raise SchedulerError(f"scancel: unknown signal {signal!r}")
                    sig = int(named)
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

    def _clients(self) -> Backend:
        """Slurm's command-line clients, for the rare requests pyslurm's job
        API does not cover (node states, a dependency dropped, slurmdbd's limits)."""
        from chain.backends.slurm.cli import SlurmCliBackend

        return SlurmCliBackend(retry=self.retry)

    def down_nodes(self, nodes: Sequence[str]) -> set[str]:
        """With sinfo (asked only after a runner lost a node or stalled)."""
        return self._clients().down_nodes(nodes)

    def release(self, job_id: str) -> None:
        """With scontrol (one rare call, at a preemption)."""
        self._clients().release(job_id)

    def job_limits(self, *, account: str = "", qos: str = "", partition: str = "") -> JobLimits | None:
        """With sacctmgr: the limits are slurmdbd's."""
        return self._clients().job_limits(account=account, qos=qos, partition=partition)

    def preempting(self, job_id: str, *, restarts: int = 0) -> bool:
        job = self._load(job_id)
        if job is None:
            return False
        count = getattr(job, "restart_cnt", None)
        info = dataclasses.replace(
            self._info(job, "pyslurm"),
            preempt_time=_num(getattr(job, "preempt_time", None)),
            restarts=int(count) if isinstance(count, int) else None,
        )
        return preempting(info, restarts)

    def scheduler_end(self, job_id: str) -> float | None:
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
            jobs = self._retrying("db.Jobs.load", lambda: db.Jobs.load(db.JobFilter(ids=[int(j) for j in ids])))
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
