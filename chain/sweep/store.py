"""The sweep directory: ``sweep.json``, and one working directory per point.

::

    DIR/sweep.json                  the record (chain.sweep.record)
    DIR/lr=0.001_seed=0/            a point: the app runs here
    DIR/lr=0.001_seed=0/params.json its parameters, typed
    DIR/lr=0.001_seed=0/.chain/     its chain
    DIR/report/                     chain sweep report's files

Commands that change the record (submit, add) hold the sweep directory's
lock (``flock`` on the directory, as a chain's own commands do on theirs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chain.api.config import CHAIN_DIR_NAME, read_user_text
from chain.errors import ChainDirError, ConfigError
from chain.primitives import atomic, bounded, safeio
from chain.store import ChainDir
from chain.sweep.command import PARAMS_FILE
from chain.sweep.record import PointEntry, SweepRecord
from chain.sweep.spec import SweepSpec, parse_sweep_text

RECORD_FILE = "sweep.json"
REPORT_DIR = "report"
RECORD_CAP = 32 << 20  # bytes: 10 000 points of long values fit
SWEEP_FILE_CAP = 4 << 20


@dataclass(frozen=True)
class SweepDir:
    """A sweep's directory (absolute)."""

    root: Path

    @property
    def record_file(self) -> Path:
        return self.root / RECORD_FILE

    @property
    def report_dir(self) -> Path:
        return self.root / REPORT_DIR

    def point_dir(self, entry: PointEntry) -> Path:
        """The point's working directory (its name is one safe path component)."""
        if os.sep in entry.name or entry.name in ("", ".", ".."):  # naming makes none such: a bug, not input
            raise ValueError(f"unsafe point name {entry.name!r}")
        return self.root / entry.name

    def chain_dir(self, entry: PointEntry) -> Path:
        return self.point_dir(entry) / CHAIN_DIR_NAME

    def exists(self) -> bool:
        return self.record_file.is_file()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the sweep's lock (another submit or add waits, then is refused)."""
        # ChainDir's lock is a flock on the directory that holds it: here, the sweep's directory
        with ChainDir(self.record_file).locked():
            yield

    def read(self) -> SweepRecord:
        """The sweep's record (a one-line error when there is none, or it is damaged)."""
        try:
            data = bounded.loads_json(safeio.read_file(self.record_file, RECORD_CAP))
        except FileNotFoundError:
            raise ChainDirError(
                f"no sweep in {self.root} (no {RECORD_FILE}): start one with chain sweep submit"
            ) from None
        except OSError as exc:
            raise ChainDirError(f"cannot read {self.record_file}: {exc.strerror or exc}") from None
        except ValueError as exc:  # bad JSON or a bound passed
            raise ChainDirError(f"{self.record_file} is damaged: {exc}") from None
        try:
            return SweepRecord.from_json(data, str(self.record_file))
        except ConfigError as exc:
            raise ChainDirError(str(exc)) from None

    def make(self) -> None:
        """Make the sweep's directory (with its parents) if missing; refused
        where no point's jobs could name their logs (``check_job_dir``)."""
        from chain.api.templating import check_job_dir

        check_job_dir(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainDirError(f"cannot make the sweep directory {self.root}: {exc.strerror or exc}") from None

    def write(self, record: SweepRecord) -> None:
        """Replace the record, once it is known to read back (``read``): a
        value past a bound the reader keeps, or a record past its size cap,
        is a one-line ``ConfigError`` and nothing is written, never a
        ``sweep.json`` every command would call damaged."""
        data = atomic.json_bytes(record.to_json())
        _check_reads_back(data, str(self.record_file))
        try:
            atomic.write_bytes_atomic(self.record_file, data)
        except OSError as exc:
            raise ChainDirError(f"cannot write {self.record_file}: {exc.strerror or exc}") from None

    def prepare_point(self, entry: PointEntry) -> Path:
        """Make the point's directory with its ``params.json``; the directory."""
        directory = self.point_dir(entry)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            atomic.write_bytes_atomic(directory / PARAMS_FILE, atomic.json_bytes(entry.point.as_dict()))
        except OSError as exc:
            raise ChainDirError(f"cannot prepare point {directory}: {exc.strerror or exc}") from None
        return directory


def read_sweep_file(path: Path) -> SweepSpec:
    """A sweep file named by the user; a FIFO or a device is refused, never waited on."""
    return parse_sweep_text(read_user_text(path, SWEEP_FILE_CAP, "sweep file"), str(path))


def _check_reads_back(data: bytes, label: str) -> None:
    if len(data) > RECORD_CAP:
        raise ConfigError(
            f"the sweep's record would take {len(data) >> 20} MiB (at most {RECORD_CAP >> 20}): "
            "fewer points or shorter values"
        )
    try:
        SweepRecord.from_json(bounded.loads_json(data), label)
    except (ValueError, ConfigError) as exc:
        raise ConfigError(f"refusing to write a sweep record chain could not read back: {exc}") from None
