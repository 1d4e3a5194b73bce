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

__all__ = ["ITER_EVENTS", "RunLog", "configure_logging", "log_iteration"]

LOG_FORMAT = "%(asctime)s.%(msecs)03dZ %(name)s %(levelname)s %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


def configure_logging(path: str | os.PathLike[str] | None = None, level: int = logging.INFO) -> logging.Handler:
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
        stamp = datetime.fromtimestamp(self._clock(), tz=timezone.utc).isoformat(timespec="milliseconds")
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

    def checkpoint(self, step: int, path: str | os.PathLike[str], warning_present: bool, **fields: object) -> str:
        """A checkpoint of ``step`` was committed at ``path``."""
        return self.event("checkpoint", step=step, path=os.fspath(path), warning=warning_present, **fields)

    def stop(self, step: int, exit_code: int, reason: str, **fields: object) -> str:
        """The run is exiting with ``exit_code`` after committing ``step``."""
        return self.event("exit", step=step, code=exit_code, reason=reason, **fields)


ITER_EVENTS = ("start", "iter", "ckpt", "exit")


def log_iteration(
    event: str, iteration: int, code: int | None = None, *, path: str | os.PathLike[str] | None = None
) -> None:
    """Append one line to the chain's iteration log: ``<epoch> <event>
    <iteration> <job|-> <pid> [code]``, in ``path`` (default
    ``$CHAIN_ITER_LOG``, else ``iterations.log`` in the working directory).

    ``event`` is ``start`` (the app began at ``iteration``), ``iter`` (it
    computed ``iteration``), ``ckpt`` (it saved ``iteration``) or ``exit``
    (with its exit ``code``). ``chain report`` reads the log to count the
    work redone after a kill and draws it in the progress plot. One write on
    a file opened to append, so a killed app leaves whole lines.
    """
    if event not in ITER_EVENTS:
        raise ValueError(f"event must be one of {', '.join(ITER_EVENTS)}, not {event!r}")
    fields = [
        f"{time.time():.3f}",
        event,
        str(int(iteration)),
        os.environ.get("SLURM_JOB_ID") or "-",
        str(os.getpid()),
    ] + ([] if code is None else [str(int(code))])
    with open(
        path if path is not None else os.environ.get("CHAIN_ITER_LOG", "iterations.log"), "a", encoding="utf-8"
    ) as fh:
        fh.write(" ".join(fields) + "\n")
