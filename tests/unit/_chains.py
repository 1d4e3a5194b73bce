"""A chain directory as chain writes it, for the command-line tests."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from chain.core.decision import Verdict
from chain.core.model import ChainState, JobState
from chain.core.resolution import resolve
from chain.store import ChainDir, ChainStatus, JudgedRunner, write_json


def make_chain(
    tmp_path: Path,
    runners: int,
    state: ChainState,
    *,
    reason: str = "app checkpointed (99)",
    job_base: int = 10,
    first: int = 99000,
    max_iter: int = 100000,
) -> Path:
    """A chain directory as chain writes it: runner N (seq) is job ``job_base + N - 1`` and advanced
    its counter by 10 from ``first`` (wide counters by default, for the table layout)."""
    chain_dir = ChainDir(tmp_path / ".chain")
    chain_dir.create()
    settings = resolve({"app_cmd": "x", "max_iter": str(max_iter), "backend": "local"}, {}, {})
    write_json(chain_dir.settings_file, settings.to_json())
    now = time.time()
    for i in range(runners):
        chain_dir.append_runner(
            JudgedRunner(
                job_id=str(job_base + i),
                seq=i + 1,
                state=JobState.FAILED,
                exit_code=99,
                app_exit_code=99,
                iter_before=first + i * 10,
                iter_after=first + i * 10 + 10,
                verdict=Verdict.CONTINUE,
                reason=reason,
                start=now - 100 + i * 10,
                end=now - 91 + i * 10,
            )
        )
    chain_dir.save_status(
        ChainStatus(
            chain_id="chain-abcdef",
            state=state,
            workdir=str(tmp_path),
            backend="local",
            iteration=first + runners * 10,
            runner_seq=runners,
        )
    )
    (tmp_path / "state_iter.txt").write_text(f"{first + runners * 10}\n")
    return chain_dir.root


def running_status(**changes: Any) -> ChainStatus:
    """A chain mid-way: runner 3 (job 103) live, runner 4 queued as job 104."""
    base = ChainStatus(
        chain_id="demo-abc123",
        state=ChainState.RUNNING,
        submitter_cycle=2,
        submitter_job_id="50",
        runner_seq=3,
        runner_job_id="103",
        runner_live=True,
        iter_before=20,
        iteration=20,
        next_job_id="104",
        no_progress=1,
        retries_used=1,
        hooks=[{"name": "report", "rc": 0}],
    )
    return replace(base, **changes)
