"""One scheduler answer shared by a user's watchers on a node
(``chain.backends.shared_query``): asked once per freshness window, the
file under the user's private directory a cache only, never trusted blindly."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import FakeBackend, SteppingClock

from chain.backends.base import JobInfo
from chain.backends.shared_query import SharedQuery, cache_dir
from chain.core.model import JobState


class Scoped(FakeBackend):
    """A fake scheduler whose answers may be shared (``query_scope``)."""

    def __init__(self, scope: str = "test-cluster") -> None:
        super().__init__()
        self.scope = scope
        self.asked: list[list[str]] = []

    def query_scope(self) -> str:
        return self.scope

    def query(self, job_ids: Sequence[str], *, exit_codes: bool = True) -> dict[str, JobInfo]:
        self.asked.append(sorted(job_ids))
        return super().query(job_ids, exit_codes=exit_codes)


def _scheduler(*running: str, scope: str = "test-cluster") -> Scoped:
    fake = Scoped(scope)
    for job in running:
        fake.set_state(job, JobState.RUNNING)
    return fake


def test_a_fresh_answer_is_reused_and_a_stale_one_asked_again(tmp_path: Path) -> None:
    fake, clock = _scheduler("7"), SteppingClock(1000.0)
    shared = SharedQuery(fake, tmp_path, fresh_for=10.0, clock=clock.clock)
    assert shared.query(["7"])["7"].state is JobState.RUNNING
    clock.sleep(9.0)
    fake.set_state("7", JobState.COMPLETED, 0)
    assert shared.query(["7"])["7"].state is JobState.RUNNING  # up to 10 s old: as seen
    assert fake.queries == 1
    clock.sleep(1.0)
    assert shared.query(["7"])["7"].state is JobState.COMPLETED
    assert fake.queries == 2


def test_another_process_is_answered_from_the_file(tmp_path: Path) -> None:
    fake, clock = _scheduler("7", "8"), SteppingClock(1000.0)
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["7", "8"])
    other = SharedQuery(fake, tmp_path, clock=clock.clock)  # a new process: nothing in memory
    assert set(other.query(["8"])) == {"8"}
    assert fake.queries == 1
    elsewhere = _scheduler("8", scope="another-cluster")  # the same ids on another cluster are other jobs
    SharedQuery(elsewhere, tmp_path, clock=clock.clock).query(["8"])
    assert elsewhere.queries == 1


def test_one_query_covers_the_active_jobs_other_watchers_asked_about(tmp_path: Path) -> None:
    fake, clock = _scheduler("7", "8"), SteppingClock(1000.0)
    first = SharedQuery(fake, tmp_path, clock=clock.clock)
    first.query(["7"])
    clock.sleep(1.0)
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["8"])  # not covered: asks, for 7 too
    assert fake.asked == [["7"], ["7", "8"]]
    clock.sleep(9.5)  # first's own answer is stale; the shared one (1 s younger) is not
    assert SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])["7"].state is JobState.RUNNING
    assert fake.queries == 2


def test_a_backend_without_a_scope_shares_nothing(tmp_path: Path) -> None:
    fake, clock = FakeBackend(), SteppingClock(1000.0)
    fake.set_state("7", JobState.RUNNING)
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])
    assert fake.queries == 2 and not list(tmp_path.glob("jobs-*.json"))


def _cache_file(tmp_path: Path) -> Path:
    fake, clock = _scheduler("7"), SteppingClock(1000.0)
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])
    [cache] = tmp_path.glob("jobs-*.json")
    return cache


@pytest.mark.parametrize(
    "hostile",
    [
        '{"taken": 1000.0, "scope": "test-cluster", "asked": ["7"], "jobs": [{"job_id": "7", "state": "BOGUS"}]}',
        '{"taken": 1e999, "scope": "test-cluster", "asked": ["7"], "jobs": []}',
        "not json\x1b[2J",
        "fifo",
        "link",
    ],
)
def test_a_hostile_cache_file_is_ignored_and_the_scheduler_asked(tmp_path: Path, hostile: str) -> None:
    cache = _cache_file(tmp_path)
    cache.unlink()
    if hostile == "fifo":
        os.mkfifo(cache)
    elif hostile == "link":
        (tmp_path / "elsewhere.json").write_text('{"taken": 1000.0}')
        cache.symlink_to(tmp_path / "elsewhere.json")
    else:
        cache.write_text(hostile)
    fake, clock = _scheduler("7"), SteppingClock(1000.0)
    assert SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])["7"].state is JobState.RUNNING
    assert fake.queries == 1


def test_a_lock_file_that_is_a_fifo_never_hangs_the_view(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "jobs.lock")
    fake, clock = _scheduler("7"), SteppingClock(1000.0)
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])
    SharedQuery(fake, tmp_path, clock=clock.clock).query(["7"])
    assert fake.queries == 2  # asked alone each time: nothing shared through a file it cannot lock


def test_the_cache_directory_is_the_users_own_or_none(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    own = cache_dir(os.getuid(), {"XDG_RUNTIME_DIR": str(runtime)})
    assert own == runtime / "chain" and stat.S_IMODE(own.stat().st_mode) == 0o700
    own.chmod(0o755)  # ours, readable by others: made private again
    assert cache_dir(os.getuid(), {"XDG_RUNTIME_DIR": str(runtime)}) == own
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    own.chmod(0o777)  # another user could write it: not trusted
    assert cache_dir(os.getuid(), {"XDG_RUNTIME_DIR": str(runtime)}) is None
    assert cache_dir(os.getuid() + 1, {"XDG_RUNTIME_DIR": str(tmp_path)}) is None  # not that user's
    (tmp_path / "target").mkdir(mode=0o700)
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "chain").symlink_to(tmp_path / "target")
    assert cache_dir(os.getuid(), {"XDG_RUNTIME_DIR": str(tmp_path / "link")}) is None  # a link, not followed


def test_a_watching_status_view_asks_once_per_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chain import api

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    fake = _scheduler()
    api.submit(
        {"app_cmd": "true", "max_iter": 10},
        {},
        config=None,
        chain_dir=tmp_path / ".chain",
        workdir=tmp_path,
        backend=fake,
    )
    before = fake.queries
    for _ in range(3):  # chain status --watch, chain submit --wait, Chain.wait: a look every second or so
        api.status_report(tmp_path / ".chain", history=0, backend=fake, watching=True)
    assert fake.queries == before + 1
    api.status_report(tmp_path / ".chain", history=0, backend=fake)  # chain status: always asks
    assert fake.queries == before + 2
