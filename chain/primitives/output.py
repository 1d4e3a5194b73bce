"""A job's own output (its Slurm log) that never stops the job.

The submitter, a runner and the local backend's supervisor write log lines to
stdout and stderr, which Slurm (or the local backend) opened on files in the
chain directory.  When that file system is full, every write there fails
with ENOSPC, and ``print`` raises: the job died at its next log line, the
chain stayed ``running`` with nothing driving it (CI, a full file system for
25 s).  A lost log line is not state: ``chain.log``, ``state.json`` and the
runner records carry what matters, and their writes are retried.
"""

from __future__ import annotations

import io
import os
import sys

__all__ = ["JobOutput", "keep_job_output"]


class JobOutput(io.TextIOBase):
    """Unbuffered text output to a file descriptor whose failed writes are
    counted (``lost``) and dropped, never raised."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.lost = 0  # writes dropped because the descriptor refused them

    @property
    def encoding(self) -> str:  # type: ignore[override]  # typeshed: an attribute; io: a read-only property
        return "utf-8"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)  # False for a closed descriptor: it does not raise

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "backslashreplace")
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:  # ENOSPC, EIO, EDQUOT, a closed descriptor: drop the line
            self.lost += 1
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered."""


def keep_job_output() -> None:
    """Replace ``sys.stdout`` and ``sys.stderr`` of a job process (the
    submitter, a runner, a local supervisor) by ``JobOutput`` on the same
    descriptors, after flushing what the old ones hold if they can."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if isinstance(old, JobOutput):
            continue
        try:
            if old is not None:
                old.flush()
        except (OSError, ValueError):
            pass
        setattr(sys, name, JobOutput(fd))
