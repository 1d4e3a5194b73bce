"""The local backend's spool writes its files crash-safe and through no link:
the counter, each record and each batch script are replaced by
the one atomic writer (``chain.primitives.atomic.write_at``), so a failure in
the middle of a write leaves the old file whole; a link planted in the spool
is replaced or refused, never followed."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chain.backends.local.spool import JobRecord, Spool
from chain.core.retry import RetryPolicy
from chain.primitives import atomic
from chain.store.guarded import ChainFileError

pytestmark = pytest.mark.timeout(60)


def _job(job_id: str, name: str = "n") -> JobRecord:
    return JobRecord(
        job_id=job_id,
        name=name,
        user="u",
        batch_script=f"/s/jobs/{job_id}.sh",
        script="/x.sbatch",
        submit_dir="/w",
        work_dir="/w",
        stdout="/w/o",
        stderr="/w/o",
        open_mode="append",
        dependency=None,
        time_limit=60.0,
        time_limit_text="1",
        time_scale=1.0,
        kill_wait=1.0,
        env={},
        submit_time=1.0,
    )


def _spool(tmp_path: Path) -> Spool:
    """A spool where the chain keeps it (``.chain/local-jobs``), with job 1
    in it and its lock; a failed write is not retried (the jobs ride them out)."""
    spool = Spool(tmp_path / ".chain" / "local-jobs", storage=RetryPolicy(attempts=1, retry_on=OSError))
    spool.create(_job)
    with spool.locked("1"):
        pass
    return spool


def _failing_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fails after the new bytes are written, before they are published."""

    def fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)


def _no_temporaries(spool: Spool) -> None:
    left = [p.name for p in spool.root.rglob("*") if p.name.startswith(atomic.TMP_PREFIX)]
    assert left == []


def test_a_failed_record_write_leaves_the_old_record_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = _spool(tmp_path)
    before = spool.record_path("1").read_bytes()
    _failing_fsync(monkeypatch)
    with pytest.raises(OSError, match="Input/output error"):
        spool.write(dataclasses.replace(_job("1"), reason="x" * 100_000))
    assert spool.record_path("1").read_bytes() == before
    _no_temporaries(spool)


def test_a_failed_id_leaves_the_counter_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter was truncated and rewritten in place: a failure there left
    it empty or at an id whose record was never written."""
    spool = _spool(tmp_path)
    _failing_fsync(monkeypatch)
    with pytest.raises(OSError, match="Input/output error"):
        spool.create(_job)
    assert (spool.root / "counter").read_text() == "1\n"
    _no_temporaries(spool)


def test_a_failed_batch_script_write_leaves_no_half_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = _spool(tmp_path)
    spool.write_script("1", "#!/bin/bash\necho one\n")
    _failing_fsync(monkeypatch)
    with pytest.raises(OSError, match="Input/output error"):
        spool.write_script("1", "#!/bin/bash\n" + "echo two\n" * 10_000)
    assert spool.script_path("1").read_text() == "#!/bin/bash\necho one\n"


def test_every_file_the_spool_writes_goes_through_the_one_atomic_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    real: Callable[..., None] = atomic.write_at

    def spy(dir_fd: int, name: str, data: bytes, **kwargs: Any) -> None:
        written.append(name)
        real(dir_fd, name, data, **kwargs)

    monkeypatch.setattr(atomic, "write_at", spy)
    spool = _spool(tmp_path)
    spool.write_script("1", "true\n")
    spool.write(_job("1"))
    assert written == ["counter", "1.json", "1", "1.sh", "1.json"]  # the counter, the record, its name marker


@pytest.mark.parametrize("kind", ["counter", "record", "script", "name marker"])
def test_a_link_in_the_spool_is_replaced_never_followed(tmp_path: Path, kind: str) -> None:
    spool = _spool(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    where = {
        "counter": spool.root / "counter",
        "record": spool.record_path("1"),
        "script": spool.script_path("1"),
        "name marker": spool.name_dir("n") / "2",
    }[kind]
    where.unlink(missing_ok=True)
    where.symlink_to(victim)
    if kind == "record":
        spool.write(_job("1"))
    elif kind == "script":
        spool.write_script("1", "true\n")
    else:
        spool.create(_job)  # job 2: the counter and its marker
    assert victim.read_text() == "precious\n"
    assert not where.is_symlink() and where.is_file()


@pytest.mark.parametrize("linked", ["local-jobs", "jobs", "names", "a record's lock", "the counter's lock"])
def test_a_linked_spool_directory_or_lock_is_refused(tmp_path: Path, linked: str) -> None:
    """Nothing is written or created through it: one error naming it."""
    spool = _spool(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = {
        "local-jobs": spool.root,
        "jobs": spool.jobs,
        "names": spool.names,
        "a record's lock": spool.jobs / "1.lock",
        "the counter's lock": spool.root / "counter.lock",
    }[linked]
    aside = tmp_path / "aside"
    where.rename(aside)
    where.symlink_to(elsewhere / "target" if "lock" in linked else elsewhere)
    with pytest.raises(ChainFileError, match=str(where)):
        if linked == "a record's lock":
            with spool.locked("1"):
                pass
        else:
            spool.create(_job)
    assert list(elsewhere.iterdir()) == []
