"""Sweeps through the Python API: ``Chain.submit_many`` bounds
the concurrent sbatch calls; ``Chain.wait_all`` reads the chains' own files
and asks the scheduler once per check for all of them, and says which chain
nothing drives. Fake scheduler, injected clock: nothing sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fakes import FakeBackend, SteppingClock

from chain import Chain
from chain.core.model import ChainState, JobState
from chain.errors import ChainError
from chain.store import ChainDir


def _sweep(tmp_path: Path, fake: FakeBackend, n: int) -> list[Chain]:
    return Chain.submit_many(
        [{"workdir": tmp_path / f"lr{i}", "app_cmd": "true", "max_iter": 10} for i in range(n)], backend=fake
    )


def _submitter(chain: Chain) -> str:
    status = ChainDir(chain.chain_dir).load_status()
    assert status is not None
    return status.submitter_job_id


def _end(chain: Chain, state: ChainState = ChainState.COMPLETED) -> None:
    store = ChainDir(chain.chain_dir)
    status = store.load_status()
    assert status is not None
    status.state = state
    store.save_status(status)


def test_wait_all_reads_files_and_asks_the_scheduler_once_per_check(tmp_path: Path) -> None:
    fake, clock = FakeBackend(), SteppingClock(0.0)
    chains = _sweep(tmp_path, fake, 5)
    for job in list(fake.states):
        fake.set_state(job, JobState.RUNNING)  # the submitters run
    ended_at = {0: 30.0, 1: 50.0, 2: 250.0, 3: 250.0, 4: 370.0}

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        for i, t in list(ended_at.items()):
            if clock.now >= t:
                _end(chains[i])
                del ended_at[i]

    before = fake.queries
    finals = Chain.wait_all(chains, poll=10.0, check=120.0, sleep=sleep, clock=clock)
    assert [f.state for f in finals] == [ChainState.COMPLETED] * 5
    assert fake.queries - before == 3  # at 120, 240 and 360 s: one query for every chain at once
    assert 370.0 <= clock.now < 390.0


def test_a_chain_nothing_drives_on_two_checks_ends_the_wait_naming_it(tmp_path: Path) -> None:
    fake, clock = FakeBackend(), SteppingClock(0.0)
    chains = _sweep(tmp_path, fake, 3)
    for job in list(fake.states):
        fake.set_state(job, JobState.RUNNING)
    fake.set_state(_submitter(chains[1]), JobState.PREEMPTED)  # preempted in CANCEL mode
    with pytest.raises(ChainError, match=r"1 chain\(s\) not over .*lr1/.chain: its submitter job has ended"):
        Chain.wait_all(chains, poll=10.0, check=60.0, sleep=clock.sleep, clock=clock)
    assert 120.0 <= clock.now < 130.0  # suspected at the first check, confirmed at the second


def test_wait_all_gives_up_after_its_timeout(tmp_path: Path) -> None:
    fake, clock = FakeBackend(), SteppingClock(0.0)
    chains = _sweep(tmp_path, fake, 2)
    _end(chains[0])
    with pytest.raises(ChainError, match="1 of 2 chains still running after 30s"):
        Chain.wait_all(chains, timeout=30.0, poll=10.0, sleep=clock.sleep, clock=clock)


class SlowSbatch(FakeBackend):
    """Counts the sbatch calls in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.in_flight = self.most = 0

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
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.05)  # a real sbatch takes ~0.3 s: long enough to overlap
        with self.lock:
            self.in_flight -= 1
            return super().submit(script, job_name=job_name, dependency=dependency, env=env, cwd=cwd)


def test_submit_many_bounds_the_sbatch_calls_in_flight(tmp_path: Path) -> None:
    fake = SlowSbatch()
    chains = Chain.submit_many(
        [{"workdir": tmp_path / f"run{i}", "app_cmd": "true", "max_iter": 10} for i in range(12)],
        parallel=3,
        backend=fake,
    )
    assert [c.chain_dir for c in chains] == [(tmp_path / f"run{i}" / ".chain").resolve() for i in range(12)]
    assert fake.most == 3 and len(fake.submitted) == 24  # each chain: runner 1, then its submitter


def test_submit_many_names_what_failed_and_submits_the_rest(tmp_path: Path) -> None:
    fake = FakeBackend()
    specs = [
        {"workdir": tmp_path / "ok", "app_cmd": "true", "max_iter": 10},
        {"workdir": tmp_path / "bad", "app_cmd": "true", "max_iter": 0},
    ]
    with pytest.raises(ChainError, match=r"1 of 2 chains were not submitted \(.*bad: --max-iter must be at least 1"):
        Chain.submit_many(specs, backend=fake)
    assert (tmp_path / "ok" / ".chain" / "state.json").is_file() and len(fake.submitted) == 2
    with pytest.raises(ChainError, match="parallel must be at least 1"):
        Chain.submit_many(specs, parallel=0)


def test_submit_many_reports_a_spec_that_is_not_even_a_setting(tmp_path: Path) -> None:
    fake = FakeBackend()
    specs = [
        {"workdir": tmp_path / "ok", "app_cmd": "true", "max_iter": 10},
        {"workdir": tmp_path / "odd", "app_cmd": "true", "max_iter": 10, "chain_dir": 42},
    ]
    with pytest.raises(ChainError, match=r"1 of 2 chains were not submitted \(.*odd: TypeError"):
        Chain.submit_many(specs, backend=fake)
    assert (tmp_path / "ok" / ".chain" / "state.json").is_file()
