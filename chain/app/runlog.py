"""Logging for unattended runs: timestamped, appended, one line per event.

A run that nobody watches is understood only from its log, so:

* the file is opened in append mode: a resumed run adds to the log of the
  run it continues instead of erasing it;
* every line carries a UTC wall-clock timestamp, the job id and the pid;
* each checkpoint line carries the four values needed to correlate an
  interruption: wall time, step, the path of the checkpoint written, and
  whether a termination warning was present.

Each line is written with one ``write`` on a freshly opened append-mode file
and flushed at once, so nothing is lost in a buffer when the process is
killed, and lines from consecutive jobs of the chain interleave cleanly.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["RunLog", "configure_logging"]

LOG_FORMAT = "%(asctime)s.%(msecs)03dZ %(name)s %(levelname)s %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


def configure_logging(
    path: str | os.PathLike[str] | None = None, level: int = logging.INFO
) -> logging.Handler:
    """Route the ``logging`` module (including ``chain.app.*``) to ``path`` in
    append mode with timestamps, or to stderr when ``path`` is None.  Returns
    the handler so a caller can remove it."""
    handler: logging.Handler
    if path is None:
        handler = logging.StreamHandler()
    else:
        handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    formatter = logging.Formatter(LOG_FORMAT, DATE_FORMAT)
    formatter.converter = time.gmtime  # UTC: jobs run on nodes in any zone
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}"
    text = str(v)
    return text if text and not any(c.isspace() for c in text) else repr(text)


class RunLog:
    """Appends ``<UTC time> job=<id> pid=<pid> event=<name> key=value ...``.

    ``job_id`` defaults to ``$SLURM_JOB_ID`` (``-`` when absent).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        job_id: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.job_id = job_id or os.environ.get("SLURM_JOB_ID") or "-"
        self._clock = clock

    def event(self, name: str, **fields: object) -> str:
        """Append one line; return it (without the newline)."""
        stamp = datetime.fromtimestamp(self._clock(), tz=timezone.utc).isoformat(
            timespec="milliseconds"
        )
        parts = [
            stamp.replace("+00:00", "Z"),
            f"job={self.job_id}",
            f"pid={os.getpid()}",
            f"event={name}",
        ]
        parts += [f"{k}={_value(v)}" for k, v in fields.items()]
        line = " ".join(parts)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
        return line

    def start(self, step: int, **fields: object) -> str:
        """The run started (or resumed) at ``step``."""
        return self.event("start", step=step, **fields)

    def checkpoint(
        self, step: int, path: str | os.PathLike[str], warning_present: bool, **fields: object
    ) -> str:
        """A checkpoint of ``step`` was committed at ``path``."""
        return self.event(
            "checkpoint", step=step, path=os.fspath(path), warning=warning_present, **fields
        )

    def stop(self, step: int, exit_code: int, reason: str, **fields: object) -> str:
        """The run is exiting with ``exit_code`` after committing ``step``."""
        return self.event("exit", step=step, code=exit_code, reason=reason, **fields)
