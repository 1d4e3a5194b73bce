"""Where the jobs' logs go. A chain whose jobs cannot write their own logs still completes: every
job's output file (``.chain/logs/*.out``) is /dev/full, which refuses every
write with ENOSPC as a full file system does. In CI a file system full for
25 s killed the submitter at its next log line, and the chain stayed
``running`` with nothing driving it.

Local backend only: its job ids are known before the jobs exist (1, 2, ...),
so their output files can be put in place first; Slurm's are not. The app
writes its own output elsewhere: an app that dies of ENOSPC is the app's
failure (the full-disk test covers that with --retries).

A chain in a directory whose name holds sbatch's filename patterns (``%j``,
``%x``) completes on both backends, each job's log where chain reads it."""

from __future__ import annotations

from pathlib import Path

from e2e_helpers import IterLog, chain_cmd, copy_example, wait_ended


def test_a_chain_completes_when_no_job_can_write_its_log(tmp_path: Path) -> None:
    copy_example("python", tmp_path)
    logs = tmp_path / ".chain" / "logs"
    logs.mkdir(parents=True)
    for job in range(1, 30):
        for kind in ("runner", "submitter"):
            (logs / f"{kind}-{job}.out").symlink_to("/dev/full")
    chain_cmd(
        "submit",
        "--backend",
        "local",
        "--max-iter",
        "40",
        "--app-cmd",
        "python3 app.py >> app.out 2>&1",
        "--runner-time",
        "0:12",
        "--runner-margin",
        "4",
        "--poll-max",
        "5",
        cwd=tmp_path,
        env={"ITER_SECONDS": "0.3"},
    )
    report = wait_ended(tmp_path, timeout=180)
    assert report["state"] == "completed", report
    assert len(report["runners"]) >= 2, "one runner did it all: no hand-over was logged to /dev/full"
    assert [h["rc"] for h in report["hooks"] if h["name"] == "report"] == [0], report["hooks"]
    assert all(p.is_symlink() for p in logs.glob("*.out")), "a job's log was replaced, not refused"
    IterLog.read(tmp_path / "iterations.log").check_exactly_once_beyond_checkpoints(40)


def test_a_chain_in_a_directory_named_like_a_filename_pattern_completes(backend: str, tmp_path: Path) -> None:
    """sbatch expands ``%j`` anywhere in --output: unescaped in the chain
    directory's path, every job's log was to go to a directory that does not
    exist, Slurm failed each job before chain's Python started (0:53) and
    the chain stood pending with nothing queued."""
    work = tmp_path / "lr=1e-3 100%j%x"
    work.mkdir()
    copy_example("python", work)
    chain_cmd(
        "submit",
        "--backend",
        backend,
        "--max-iter",
        "12",
        "--app-cmd",
        "python3 app.py",
        "--runner-time",
        "0:30",
        "--runner-margin",
        "10",
        "--poll-max",
        "5",
        cwd=work,
        env={"ITER_SECONDS": "0.2"},
    )
    report = wait_ended(work, timeout=240)
    assert report["state"] == "completed", report
    logs = work / ".chain" / "logs"
    for runner in report["runners"]:
        assert (logs / f"runner-{runner['job_id']}.out").is_file(), sorted(p.name for p in logs.iterdir())
    assert list(logs.glob("submitter-*.out")), sorted(p.name for p in logs.iterdir())
    IterLog.read(work / "iterations.log").check_exactly_once_beyond_checkpoints(12)
