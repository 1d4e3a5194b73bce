"""Backend test helpers: the real pyslurm, where it is built, and a stand-in
for pyslurm that talks to Slurm through its CLI.

``real_pyslurm`` (in tests/conftest.py) gives the pyslurm backend on the
real pyslurm when one built for the running Slurm's release imports (``bash
scripts/setup --pyslurm``); otherwise it skips with the reason, or fails
under CI=true, where pyslurm is built.

The stand-in runs the pyslurm backend's own code (state/exit mapping, the
controller-then-accounting lookup, cancel and signal, RPCError handling) on
the dev cluster wherever it runs, with or without a real pyslurm. It mimics
only the part of pyslurm's API the backend uses (see
chain/backends/slurm/pyslurm.py): it is no evidence that real pyslurm
behaves the same, only that the backend drives that API as intended.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import pytest

from chain.backends.base import JobInfo, JobUsage
from chain.backends.slurm.parse import (
    SACCT_FIELDS,
    SACCT_USAGE_FIELDS,
    parse_sacct,
    parse_sacct_usage,
    parse_sbatch_parsable,
    parse_scontrol,
)


class StandInRPCError(Exception):
    """pyslurm.RPCError: ``errno`` and ``msg`` (slurm_strerror's text)."""

    def __init__(self, errno: int = -1, msg: str = "") -> None:
        super().__init__(msg)
        self.errno = errno
        self.msg = msg


def _run(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=60, check=False)
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip()
        raise StandInRPCError(2017 if "Invalid job id" in message else -1, message)
    return proc.stdout


def _job(info: JobInfo, **extra: Any) -> SimpleNamespace:
    code = info.exit_code or 0
    return SimpleNamespace(
        id=int(info.job_id),
        name=info.name,
        state=info.state.value,
        state_reason=info.reason,
        exit_code=code - 128 if code >= 128 else code,
        exit_code_signal=info.signal or 0,
        start_time=info.start,
        end_time=info.end,
        **extra,
    )


class _JobSubmitDescription:
    # attribute -> sbatch flag, for the attributes of pyslurm's description the backend sets
    _FLAGS: ClassVar[dict[str, str]] = {
        "name": "job-name",
        "dependencies": "dependency",
        "working_directory": "chdir",
        "time_limit": "time",
        "time_limit_min": "time-min",
        "standard_output": "output",
        "standard_error": "error",
        "log_files_open_mode": "open-mode",
        "ntasks": "ntasks",
        "cpus_per_task": "cpus-per-task",
        "memory_per_node": "mem",
        "partitions": "partition",
        "qos": "qos",
        "account": "account",
        "nodes": "nodes",
        "ntasks_per_node": "ntasks-per-node",
        "gpus": "gpus",
        "gpus_per_task": "gpus-per-task",
        "constraints": "constraint",
        "resource_sharing": "exclusive",
    }

    script: str
    environment: Any

    def __init__(self, **kwargs: Any) -> None:
        for attr in ("script", "environment", *self._FLAGS):
            setattr(self, attr, None)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def submit(self) -> int:
        argv = ["sbatch", "--parsable"]
        for attr, flag in self._FLAGS.items():
            value = getattr(self, attr)
            if attr == "resource_sharing" and value == "no":
                argv.append("--exclusive")
            elif value:
                argv.append(f"--{flag}={value}")
        env = dict(self.environment) if isinstance(self.environment, dict) else None
        if env is not None:  # pyslurm adds the submitter's SLURM_* variables to a dict
            env.update({k: v for k, v in os.environ.items() if k.startswith("SLURM_")})
        return int(parse_sbatch_parsable(_run([*argv, str(self.script)], env=env)))


class _Job:
    def __init__(self, job_id: int) -> None:
        self.id = job_id

    @staticmethod
    def load(job_id: int) -> SimpleNamespace:
        info = parse_scontrol(_run(["scontrol", "show", "job", str(job_id)])).get(str(job_id))
        if info is None:
            raise StandInRPCError(2017, "Invalid job id specified")
        return _job(info)

    def cancel(self) -> None:
        self.send_signal(9)

    def send_signal(self, signal: int | str, steps: str = "children") -> None:
        argv = ["scancel"]
        if signal != 9:
            argv.append(f"--signal={str(signal).removeprefix('SIG')}")
        if steps == "batch":
            argv.append("--batch")
        try:
            _run([*argv, str(self.id)])
        except StandInRPCError as exc:
            if "already completing or completed" not in exc.msg:  # ESLURM_ALREADY_DONE
                raise


class _Jobs:
    @staticmethod
    def load() -> dict[int, SimpleNamespace]:
        text = _run(["scontrol", "show", "job"])
        return {int(j): _job(info) for j, info in parse_scontrol(text).items()}


class _DbJobFilter:
    def __init__(self, ids: list[int] | None = None) -> None:
        self.ids = ids or []


class _DbJobs:
    @staticmethod
    def load(db_filter: _DbJobFilter) -> list[SimpleNamespace]:
        ids = ",".join(map(str, db_filter.ids))
        text = _run(["sacct", "-X", "-n", "-P", "-j", ids, "-o", SACCT_FIELDS])
        usage = parse_sacct_usage(_run(["sacct", "-n", "-P", "-j", ids, "-o", SACCT_USAGE_FIELDS]))
        return [
            _job(info, cancelled_by=None, **_db_usage(usage.get(info.job_id))) for info in parse_sacct(text).values()
        ]


def _db_usage(u: JobUsage | None) -> dict[str, Any]:
    """db.Job's accounting attributes (pyslurm/db/job.pxd, stats.pxd) from sacct's."""
    if u is None:
        return {}
    return {
        "submit_time": u.submit,
        "elapsed_time": u.elapsed,
        "nodelist": u.node,
        "cpus": u.alloc_cpus,
        "stats": SimpleNamespace(total_cpu_time=u.cpu, max_resident_memory=u.max_rss),
    }


def cli_pyslurm(version: str) -> ModuleType:
    """A module with the pyslurm API the backend uses, answered by Slurm's CLI."""
    module = ModuleType("pyslurm")
    module.__version__ = version  # type: ignore[attr-defined]
    module.RPCError = StandInRPCError  # type: ignore[attr-defined]
    module.JobSubmitDescription = _JobSubmitDescription  # type: ignore[attr-defined]
    module.Job = _Job  # type: ignore[attr-defined]
    module.Jobs = _Jobs  # type: ignore[attr-defined]
    module.db = SimpleNamespace(Jobs=_DbJobs, JobFilter=_DbJobFilter)  # type: ignore[attr-defined]
    return module


@pytest.fixture
def cli_pyslurm_module() -> Callable[[str], ModuleType]:
    """Factory of the CLI-backed pyslurm stand-in (see the module docstring)."""
    return cli_pyslurm
