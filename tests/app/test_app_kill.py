"""SIGKILL a checkpoint writer at random points: the visible state always loads.

A child process resumes from the store and saves as fast as it can (single
files and sharded directories, fsync'ed); the parent kills it with SIGKILL
after a random delay, many times, seeded.  After every kill:

* the newest complete checkpoint loads, and its content is the one its step
  says (never torn, never another step's);
* the progress counter names a complete checkpoint (never ahead);
* retention holds at least min(keep_last, committed saves) complete ones.
"""

from __future__ import annotations

import functools
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from waiting import wait_until

from chain.app import CheckpointKind, CheckpointStore, read_counter

from ._writer import payload, shard
from .conftest import PYTHON, child_env

WRITER = Path(__file__).with_name("_writer.py")
TRIALS = 40
KEEP = 2


def check_state(step: int, kind: CheckpointKind, state: object) -> None:
    if kind is CheckpointKind.DIR:
        assert state == {f"shard-{k}.bin": shard(step, k) for k in range(3)}
    else:
        assert state == payload(step)


def counter_passed(counter: Path, value: int) -> bool:
    """The writer committed a save beyond ``value`` (its counter file moved)."""
    try:
        return (read_counter(counter) or 0) > value
    except ValueError:
        return False


@pytest.mark.timeout(300)
def test_sigkill_during_saves_never_loses_a_loadable_checkpoint(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    root, counter = tmp_path / "ck", tmp_path / "counter"
    env = child_env()
    progressed = 0
    for trial in range(TRIALS):
        start = read_counter(counter) or 0
        proc = subprocess.Popen(
            [PYTHON, str(WRITER), str(root), str(counter), str(KEEP)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("ready"), ready
        if trial % 2:
            # every other trial after a save of its own committed (an event,
            # not a time a loaded machine may not give it): the writer
            # provably progresses; the others may die before their first save
            wait_until(
                functools.partial(counter_passed, counter, start),
                60,
                interval=0.005,
                what=f"trial {trial}'s writer to commit a save",
            )
        time.sleep(rng.uniform(0.0, 0.25))  # lands anywhere inside the save loop
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()

        store = CheckpointStore(root, keep_last=KEEP, keep_best=False, durable=False)
        complete = store.checkpoints()
        committed = read_counter(counter)
        if committed is None:
            assert not complete
            continue
        steps = [i.step for i in complete]
        # the counter is never ahead: its checkpoint exists and is complete
        assert committed in steps, (trial, committed, steps)
        assert max(steps) <= committed + 1  # at most one published, counter not yet written
        # retention never holds fewer than promised
        assert len(complete) >= min(KEEP, committed), (trial, steps)
        # every complete checkpoint loads and holds its own step's content
        for info in complete:
            check_state(info.step, info.kind, store.load(info))
        progressed = max(progressed, committed)
    assert progressed >= TRIALS // 2  # the writer really did save many times


@pytest.mark.timeout(120)
def test_restore_after_kills_continues_numbering(tmp_path: Path) -> None:
    root, counter = tmp_path / "ck", tmp_path / "counter"
    for _ in range(2):
        before = read_counter(counter) or 0
        proc = subprocess.Popen(
            [PYTHON, str(WRITER), str(root), str(counter), str(KEEP)],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        # killed once it has committed a save (was: after 0.3 s, which a
        # loaded machine may spend before the first save)
        wait_until(functools.partial(counter_passed, counter, before), 60, interval=0.005, what="a committed save")
        proc.kill()
        proc.wait()
        proc.stdout.close()
    resumed_from = int(first.split()[1])
    assert resumed_from > 0
    store = CheckpointStore(root, counter_path=counter, keep_last=KEEP, keep_best=False)
    restored = store.restore()
    assert restored is not None and restored.info.step >= resumed_from
    check_state(restored.info.step, restored.info.kind, restored.state)
    assert read_counter(counter) == restored.info.step
