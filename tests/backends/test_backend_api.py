"""The backend interface without a scheduler: ``usage`` on each backend (the
Slurm CLI backend on literal sacct output, pyslurm on a stand-in module,
the local backend on a hand-written spool), the one idempotent submit, the
registry, and the local backend's environment knobs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from fakes import FakeBackend

from chain.backends import BACKENDS, make_backend
from chain.backends.base import AccountingUnavailable, JobUsage, resubmission, submit_idempotently
from chain.backends.local.backend import LocalBackend
from chain.backends.slurm.cli import SlurmCliBackend
from chain.backends.slurm.parse import SACCT_USAGE_FIELDS
from chain.backends.slurm.pyslurm import PyslurmBackend
from chain.core.retry import RetryPolicy, TransientError
from chain.errors import ConfigError, SchedulerError

NO_WAIT = RetryPolicy(attempts=3, sleep=lambda s: None)

# sacct -n -P -o SACCT_USAGE_FIELDS on the dev cluster (Slurm 22.05.8)
SACCT = """\
1|COMPLETED|0:0|2026-12-01T13:00:00|2026-12-01T13:00:02|2026-12-01T13:00:08|6|00:00.100|vm||2
1.batch|COMPLETED|0:0|2026-12-01T13:00:02|2026-12-01T13:00:02|2026-12-01T13:00:08|6|00:00.100|vm|20128K|2
"""


class Clients:
    """Stands in for the Slurm clients: answers per program, records every call."""

    def __init__(self, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        queue = self.answers[argv[0]]
        rc, out, err = queue.pop(0) if len(queue) > 1 else queue[0]
        return subprocess.CompletedProcess(list(argv), rc, out, err)


# --- the one idempotent submit -----------------------------------------------------


def _timing_out(fake: FakeBackend, queued: bool) -> Any:
    """A submission that times out; ``queued``: the scheduler queued the job anyway."""

    def once() -> str:
        if queued:
            fake.submit(Path("job.sh"), job_name="chain-x.r1")
        raise TransientError("sbatch: Socket timed out on send/recv operation")

    return once


def test_a_timed_out_submission_that_queued_the_job_is_found_by_name() -> None:
    fake = FakeBackend()
    assert submit_idempotently(fake, "chain-x.r1", _timing_out(fake, queued=True), retry=NO_WAIT) == "101"
    assert fake.submitted == [("chain-x.r1", None)]  # not submitted twice


def test_a_timed_out_submission_that_did_not_queue_is_repeated() -> None:
    fake = FakeBackend()
    tries = iter([_timing_out(fake, queued=False), lambda: fake.submit(Path("job.sh"), job_name="chain-x.r1")])
    assert submit_idempotently(fake, "chain-x.r1", lambda: next(tries)(), retry=NO_WAIT) == "101"
    with pytest.raises(TransientError):  # without a retry policy: one try
        submit_idempotently(fake, "chain-x.r2", _timing_out(fake, queued=False))


def test_look_first_returns_the_job_an_earlier_call_queued() -> None:
    fake = FakeBackend()
    fake.submit(Path("job.sh"), job_name="chain-x.r1")

    def never() -> str:
        raise AssertionError("submitted again")

    assert submit_idempotently(fake, "chain-x.r1", never, look_first=True) == "101"


class _Looked(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.looked = 0

    def find_by_name(self, job_name: str) -> list[str]:
        self.looked += 1
        return super().find_by_name(job_name)


def test_a_resubmission_submits_at_once_and_looks_first_when_called_again() -> None:
    fake = _Looked()
    submit = resubmission(fake, "chain-x.r1", lambda: fake.submit(Path("job.sh"), job_name="chain-x.r1"))
    assert submit() == "101" and fake.looked == 0  # a first try costs no lookup
    assert submit() == "101" and fake.looked == 1  # again (after a failure): the queued job, not a second one
    assert fake.submitted == [("chain-x.r1", None)]


def test_the_slurm_cli_backend_looks_up_a_timed_out_sbatch(tmp_path: Path) -> None:
    clients = Clients(
        {
            "sbatch": [
                (1, "", ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"))
            ],
            "squeue": [(0, "4242\n", "")],
        }
    )
    backend = SlurmCliBackend(retry=NO_WAIT, run=clients)
    assert backend.submit(tmp_path / "job.sh", job_name="chain-x.r1") == "4242"
    assert [c[0] for c in clients.calls] == ["sbatch", "squeue"]
    assert "--name=chain-x.r1" in clients.calls[1]


# --- usage -----------------------------------------------------------------------------


def test_slurm_cli_usage_is_one_sacct_call() -> None:
    clients = Clients({"sacct": [(0, SACCT, "")]})
    found = SlurmCliBackend(retry=NO_WAIT, run=clients).usage(["1", "1", "2", ""])
    assert clients.calls == [["sacct", "-n", "-P", "-j", "1,2", "-o", SACCT_USAGE_FIELDS]]
    assert found == {
        "1": JobUsage(
            job_id="1",
            state="COMPLETED",
            exit_code="0:0",
            submit=found["1"].submit,
            start=found["1"].start,
            end=found["1"].end,
            elapsed=6.0,
            cpu=0.1,
            node="vm",
            max_rss=20128 * 1024,
            alloc_cpus=2,
        )
    }
    assert found["1"].queue_wait == 2.0 and found["1"].cpu_seconds == 12.0 and found["1"].final


@pytest.mark.parametrize(
    "answer,reason",
    [
        ((1, "", "sacct: error: Slurm accounting storage is disabled\n"), "Slurm accounting storage is disabled"),
        ((1, "", ""), "sacct exited 1"),
        (
            (1, "", "sacct: error: Socket timed out on send/recv operation"),
            "sacct: sacct: error: Socket timed out on send/recv operation",
        ),
    ],
)
def test_slurm_cli_usage_unavailable(answer: tuple[int, str, str], reason: str) -> None:
    clients = Clients({"sacct": [answer]})
    with pytest.raises(AccountingUnavailable) as caught:
        SlurmCliBackend(retry=NO_WAIT, run=clients).usage(["1"])
    assert str(caught.value) == reason
    assert len(clients.calls) == (3 if "timed out" in reason else 1)  # only the transient one is retried


def test_slurm_cli_usage_without_sacct() -> None:
    def missing(argv: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None) -> Any:
        raise FileNotFoundError(argv[0])

    with pytest.raises(AccountingUnavailable, match="sacct not found on PATH"):
        SlurmCliBackend(retry=NO_WAIT, run=missing).usage(["1"])


class RPCError(Exception):
    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


def _pyslurm(db: Any) -> ModuleType:
    module = ModuleType("pyslurm")
    module.__version__ = "25.11.0"  # type: ignore[attr-defined]
    module.RPCError = RPCError  # type: ignore[attr-defined]
    if db is not None:
        module.db = db  # type: ignore[attr-defined]
    return module


def test_pyslurm_usage_from_its_accounting_api() -> None:
    asked: list[list[int]] = []
    job = SimpleNamespace(
        id=7,
        state="TIMEOUT",
        exit_code=0,
        exit_code_signal=15,
        submit_time=100,
        start_time=103,
        end_time=163,
        elapsed_time=60,
        nodelist="node1",
        cpus=4,
        stats=SimpleNamespace(total_cpu_time=30, max_resident_memory=2**20),
    )
    other = SimpleNamespace(id=8, state="COMPLETED", exit_code=0, start_time=0, end_time=0)

    def load(db_filter: Any) -> dict[int, Any]:
        asked.append(db_filter.ids)
        return {7: job, 8: other}

    db = SimpleNamespace(JobFilter=lambda ids: SimpleNamespace(ids=ids), Jobs=SimpleNamespace(load=load))
    backend = PyslurmBackend(retry=NO_WAIT, module=_pyslurm(db), slurm_version="25.11.2")
    found = backend.usage(["7", "7"])
    assert asked == [[7]] and list(found) == ["7"]  # one request; ids not asked for are left out
    assert found["7"] == JobUsage(
        job_id="7",
        state="TIMEOUT",
        exit_code="0:15",
        submit=100.0,
        start=103.0,
        end=163.0,
        elapsed=60.0,
        cpu=30.0,
        node="node1",
        max_rss=2**20,
        alloc_cpus=4,
    )
    assert backend.usage([]) == {}


def test_pyslurm_usage_unavailable() -> None:
    bare = PyslurmBackend(retry=NO_WAIT, module=_pyslurm(None), slurm_version="25.11.2")
    with pytest.raises(AccountingUnavailable, match=r"no accounting API \(pyslurm.db\)"):
        bare.usage(["7"])

    def down(db_filter: Any) -> Any:
        raise RPCError("Unable to contact slurm controller (connect failure)")

    db = SimpleNamespace(JobFilter=lambda ids: SimpleNamespace(ids=ids), Jobs=SimpleNamespace(load=down))
    with pytest.raises(AccountingUnavailable, match="Unable to contact slurm controller"):
        PyslurmBackend(retry=NO_WAIT, module=_pyslurm(db), slurm_version="25.11.2").usage(["7"])


def test_local_usage_reads_its_records_without_changing_them(tmp_path: Path) -> None:
    jobs = tmp_path / "spool" / "jobs"
    jobs.mkdir(parents=True)
    record: dict[str, Any] = {
        "job_id": "3",
        "name": "chain-x.s1",
        "user": "u",
        "batch_script": "b",
        "script": "s",
        "submit_dir": "/w",
        "work_dir": "/w",
        "stdout": "o",
        "stderr": "o",
        "open_mode": "append",
        "dependency": None,
        "time_limit": None,
        "time_limit_text": None,
        "time_scale": 1.0,
        "kill_wait": 30.0,
        "env": {},
        "submit_time": 10.0,
        "state": "RUNNING",
        "start": 12.0,
        "end": None,
        "hostname": "vm",
    }  # no supervisor: a query would finish it as NODE_FAIL
    (jobs / "3.json").write_text(json.dumps(record))
    (jobs / "4.json").write_text("{not json")
    before = (jobs / "3.json").read_text()
    backend = LocalBackend(tmp_path / "spool", kill_wait=0, time_scale=1)
    found = backend.usage(["3", "4", "5"])
    assert list(found) == ["3"]  # corrupt and unknown records are left out
    u = found["3"]
    assert (u.state, u.exit_code, u.node, u.queue_wait, u.alloc_cpus, u.end, u.final) == (
        "RUNNING",
        "",
        "vm",
        2.0,
        None,
        None,
        False,
    )
    assert (jobs / "3.json").read_text() == before
    assert (backend.accounting, backend.usage_source) == (False, "local backend")


def test_a_backend_without_accounting_says_so() -> None:
    with pytest.raises(AccountingUnavailable, match="the slurm backend keeps no accounting"):
        FakeBackend().usage(["101"])


# --- the registry and the local backend's knobs -------------------------------------------


def test_registry(tmp_path: Path) -> None:
    assert list(BACKENDS) == ["slurm", "local", "pyslurm"]
    assert isinstance(make_backend("slurm", tmp_path), SlurmCliBackend)
    local = make_backend("local", tmp_path)
    assert isinstance(local, LocalBackend) and local.spool.root == tmp_path / "local-jobs"
    with pytest.raises(SchedulerError) as caught:
        make_backend("lsf", tmp_path)
    assert str(caught.value) == "unknown backend 'lsf' (auto, slurm, local or pyslurm)"


@pytest.mark.parametrize(
    "value,message",
    [
        ("fast", "CHAIN_LOCAL_TIME_SCALE='fast' is not a number"),
        ("0", "CHAIN_LOCAL_TIME_SCALE='0' must be a number > 0"),
        ("-1", "CHAIN_LOCAL_TIME_SCALE='-1' must be a number > 0"),
        ("nan", "CHAIN_LOCAL_TIME_SCALE='nan' must be a number > 0"),
    ],
)
def test_a_malformed_time_scale_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("CHAIN_LOCAL_TIME_SCALE", value)
    with pytest.raises(ConfigError) as caught:
        make_backend("local", tmp_path)
    assert str(caught.value) == message


def test_time_scale_and_kill_wait_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAIN_LOCAL_TIME_SCALE", " 0.25 ")
    monkeypatch.setenv("CHAIN_LOCAL_KILL_WAIT", "0")
    backend = make_backend("local", tmp_path)
    assert isinstance(backend, LocalBackend) and (backend.time_scale, backend.kill_wait) == (0.25, 0.0)
    monkeypatch.setenv("CHAIN_LOCAL_TIME_SCALE", "")
    assert LocalBackend(tmp_path).time_scale == 1.0
