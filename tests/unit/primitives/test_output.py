"""JobOutput: a job's log line that cannot be written is dropped and
counted, never raised (a full file system under the job's Slurm log)."""

from __future__ import annotations

import os
import subprocess
import sys

from chain.primitives.output import JobOutput


def test_a_refused_write_is_counted_not_raised() -> None:
    fd = os.open("/dev/full", os.O_WRONLY)  # every write: ENOSPC
    try:
        out = JobOutput(fd)
        print("a line the full disk refuses", file=out, flush=True)
        assert out.write("x") == 1
        assert out.lost == 3  # the line, print's newline, "x"
    finally:
        os.close(fd)


def test_written_lines_arrive_whole_and_in_order() -> None:
    read, write = os.pipe()
    out = JobOutput(write)
    print("first", file=out)
    out.write("zweite Zeile \udcff\n")  # a lone surrogate is escaped, not an error
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        assert fh.read() == b"first\nzweite Zeile \\udcff\n"
    assert out.lost == 0


def test_a_job_process_survives_stdout_and_stderr_on_a_full_disk() -> None:
    """The entry's effect in a real process: print and an uncaught error's
    report both go to /dev/full; the process ends with its own exit code."""
    code = (
        "from chain.primitives.output import keep_job_output\n"
        "keep_job_output()\n"
        "print('runner: stop signal', flush=True)\n"
        "print('warning', file=__import__('sys').stderr)\n"
        "raise SystemExit(99)\n"
    )
    with open("/dev/full", "wb") as full:
        kept = subprocess.run([sys.executable, "-c", code], stdout=full, stderr=full, check=False)
        bare = subprocess.run(
            [sys.executable, "-c", code.replace("keep_job_output()\n", "")], stdout=full, stderr=full, check=False
        )
    assert kept.returncode == 99
    assert bare.returncode != 99  # without it, the first print ends the process
