"""Reading the chain's counter: the one place that does (I/O allowed here).

Without ``--counter-cmd`` the counter is the contract's file CKPT_PATH (a
plain integer, ``store.jsonio.read_counter``). With one it comes from the
app's own checkpoint (``chain.core.counterspec``): a JSON key path, the
newest complete ``…-N`` name (``chain.core.verify``: a save cut short is
passed over), a key of a ``torch.save`` dict (a plain integer read
from the file without torch, ``chain.store.torch_counter.plain_counter``;
anything else loaded by torch in a subprocess, so the chain never imports
torch), or a shell command bounded by ``COUNTER_CMD_TIMEOUT``.

Two entries: ``read_counter_state`` (and ``read_chain_counter``), what the
jobs decide on: every reader, a shell command and torch included; every
reader says 0 when there is no checkpoint yet, and raises a one-line
``CheckpointError`` for anything it cannot read. ``known_counter``, what the
login-node views show (``chain status``, ``chain list``, the report): the
counter the jobs last recorded, refreshed from the checkpoint only where
that runs no program.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chain.core.counterspec import (
    CounterKind,
    CounterSpec,
    SpecError,
    as_counter,
    key_path_value,
    parse_counter_spec,
)
from chain.core.decision import COUNTER_CMD_LABEL
from chain.core.settings import Settings
from chain.errors import CheckpointError
from chain.primitives import bounded, safeio
from chain.primitives.atomic import CounterFormatError, parse_counter
from chain.primitives.codes import NO_CHECKPOINT_EXIT
from chain.store.jsonio import read_counter

if TYPE_CHECKING:  # the verification of ``glob:`` checkpoints: loaded where one is read, not in every job
    from chain.core.verify import Candidate, Marks

JSON_COUNTER_CAP = 64 << 20  # bytes of a json: counter file read at most (a trainer state, not a data set)

COUNTER_CMD_TIMEOUT = 120.0  # seconds a --counter-cmd command (or the torch reader) may take


@dataclass(frozen=True)
class CounterReading:
    """The counter, whether a checkpoint is there at all (False: none yet,
    read as 0), and the file holding it when it is one (its mtime is when
    the app last saved)."""

    value: int
    present: bool
    file: Path | None = None


def counter_source(settings: Settings) -> str:
    """How a message names where the counter comes from: CKPT_PATH as
    configured, or the app's checkpoint with its spec
    (``out/ckpt.json (--counter-cmd json:out/ckpt.json:iter_num)``;
    ``core.decision.missing_counter`` words both)."""
    spec = settings.counter_spec
    if spec.kind is CounterKind.FILE:
        return settings.ckpt_path
    if spec.kind is CounterKind.CMD:
        return f"{COUNTER_CMD_LABEL}{spec.command!r} exited {NO_CHECKPOINT_EXIT}: none yet)"
    return f"{spec.path} {COUNTER_CMD_LABEL}{spec.text})"


def read_chain_counter(settings: Settings, workdir: Path) -> int:
    """The chain's counter (0: no checkpoint yet). Raises ``CheckpointError``."""
    return read_counter_state(settings, workdir).value


def known_counter(recorded: int, workdir: str | Path, *, counter_cmd: str, ckpt_path: str) -> int:
    """The chain's counter as chain last knew it, for the login-node views
    (``chain status``, ``chain list``, the report: they must agree):
    ``recorded``, what its jobs last recorded (``state.json``'s iteration),
    refreshed from the app's checkpoint where reading it runs no program
    (CKPT_PATH, ``json:``, ``glob:``, ``torch:`` holding a plain integer).
    No program is run: a shell command's counter, a checkpoint not there,
    unreadable or half-written, stays the recorded one."""
    if not workdir or not (counter_cmd or ckpt_path):
        return recorded
    try:
        reading = _read_in_process(parse_counter_spec(counter_cmd), ckpt_path, Path(workdir))
    except (SpecError, CheckpointError):
        return recorded
    return reading.value if reading is not None and reading.present else recorded


def counter_settings(stored: Mapping[str, Any]) -> dict[str, str]:
    """``known_counter``'s ``counter_cmd`` and ``ckpt_path`` from a chain's
    stored settings as read (``chain list`` and the report read a few keys
    of ``settings.json``, not all of it): a value that is not text is ""."""
    values = {key: stored.get(key) for key in ("counter_cmd", "ckpt_path")}
    return {key: value if isinstance(value, str) else "" for key, value in values.items()}


def read_counter_state(settings: Settings, workdir: Path, *, timeout: float = COUNTER_CMD_TIMEOUT) -> CounterReading:
    """The counter with its facts (``CounterReading``). Raises ``CheckpointError``."""
    spec = settings.counter_spec
    reading = _read_in_process(spec, settings.ckpt_path, workdir)
    if reading is not None:
        return reading
    if spec.kind is CounterKind.TORCH:
        return _read_torch(spec, workdir / spec.path, timeout)
    return read_cmd(spec.command, workdir, timeout=timeout)


def _read_in_process(spec: CounterSpec, ckpt_path: str, workdir: Path) -> CounterReading | None:
    """The counter when reading it runs no program; None when it takes one
    (a shell command; a torch value only torch can read). Raises ``CheckpointError``."""
    if spec.kind is CounterKind.FILE:
        path = workdir / ckpt_path
        return CounterReading(read_counter(path), path.exists(), path)
    if spec.kind is CounterKind.JSON:
        return _read_json(spec, workdir / spec.path)
    if spec.kind is CounterKind.GLOB:
        return _read_glob(spec, workdir)
    if spec.kind is CounterKind.TORCH:
        path = workdir / spec.path
        if not path.exists():
            return CounterReading(0, False, path)
        from chain.store.torch_counter import plain_counter  # zipfile and pickle: a torch counter's only

        value = plain_counter(path, spec.key[0])
        return CounterReading(value, True, path) if value is not None else None
    return None


def _read_json(spec: CounterSpec, path: Path) -> CounterReading:
    what = f"--counter-cmd {spec.text}"
    try:
        text = safeio.read_file(path, JSON_COUNTER_CAP)
    except FileNotFoundError:
        return CounterReading(0, False, path)
    except OSError as exc:  # a FIFO, a device or a file past the cap included: refused, never waited on
        raise CheckpointError(f"{what}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = bounded.loads_json(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{what}: {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:  # past a bound: a huge number, nested too deep, not UTF-8
        raise CheckpointError(f"{what}: {path} cannot be read as a counter: {exc}") from None
    try:
        value = key_path_value(data, spec.key)
    except KeyError as exc:
        raise CheckpointError(f"{what}: {path} has no key {exc.args[0]}") from None
    counter = as_counter(value)
    if counter is None:
        raise CheckpointError(
            f"{what}: key {'.'.join(spec.key)} of {path} is {str(value)[:40]!r}, not a non-negative integer"
        )
    return CounterReading(counter, True, path)


def glob_candidates(spec: CounterSpec, workdir: Path) -> list[Candidate]:
    """The names a ``glob:`` spec matches that carry a number, newest first
    (``core.verify.candidates``: set-aside ones left out)."""
    import glob  # only for a glob: counter, not in every runner's start

    from chain.core.verify import candidates

    return candidates(glob.glob(os.path.join(workdir, spec.path)))


def glob_marks(spec: CounterSpec, workdir: Path) -> list[Marks]:
    """Each numbered name a ``glob:`` spec matches, newest first, with what
    ``stat`` tells of it (``core.verify.Marks``): stat calls only, so a FIFO,
    a link loop or a vanished name is no checkpoint, never waited on."""
    return [_marks(found) for found in glob_candidates(spec, workdir)]


def _marks(found: Candidate) -> Marks:
    from chain.core.verify import DONE_MARKER, Marks, required_marker

    path = Path(found.path)
    mode = path_mode(path)
    is_dir = mode is not None and stat.S_ISDIR(mode)
    is_file = mode is not None and stat.S_ISREG(mode)
    if not is_dir:
        return Marks(found, is_dir, is_file)
    has_done = _is_regular(path / DONE_MARKER)
    marker = required_marker(path.name, is_dir=True, has_done=has_done)
    return Marks(found, True, False, has_done, marker is not None and _is_regular(path / marker))


def path_stat(path: Path) -> os.stat_result | None:
    """``path``'s stat, links followed; None when there is nothing usable there."""
    try:
        return path.stat()
    except (OSError, ValueError):  # gone, a link loop, a name the OS refuses
        return None


def path_mode(path: Path) -> int | None:
    """``path``'s mode, links followed; None when there is nothing usable there."""
    found = path_stat(path)
    return found.st_mode if found is not None else None


def _is_regular(path: Path) -> bool:
    mode = path_mode(path)
    return mode is not None and stat.S_ISREG(mode)


def _read_glob(spec: CounterSpec, workdir: Path) -> CounterReading:
    """The newest complete checkpoint's number (``core.verify.newest_complete``):
    a save cut short (its marker missing) is passed over, so the counter never
    runs ahead of a checkpoint."""
    from chain.core.verify import newest_complete

    newest = newest_complete(glob_marks(spec, workdir))
    if newest is None:
        return CounterReading(0, False, None)
    return CounterReading(newest.candidate.number, True, Path(newest.candidate.path))


def _read_torch(spec: CounterSpec, path: Path, timeout: float) -> CounterReading:
    """What ``plain_counter`` could not read: torch, in a subprocess."""
    argv = [sys.executable, "-m", "chain.store.torch_counter", str(path), spec.key[0]]
    reading = _run_reader(argv, f"--counter-cmd {spec.text}", path.parent, timeout)
    return CounterReading(reading.value, reading.present, path)


def read_cmd(command: str, workdir: Path, *, timeout: float = COUNTER_CMD_TIMEOUT) -> CounterReading:
    """A shell command's counter: run with ``bash -c`` in ``workdir``, at most
    ``timeout`` seconds; exit 0 with one integer on stdout, or
    ``NO_CHECKPOINT_EXIT``: none yet (0)."""
    return _run_reader(["bash", "-c", command], f"--counter-cmd {command!r}", workdir, timeout)


@dataclass(frozen=True)
class Finished:
    """A bounded command's end: its exit status, its output and the last
    line of its error output (": <line>", or "" when it wrote none)."""

    returncode: int
    out: bytes
    last_error: str


def run_bounded(
    argv: list[str], what: str, cwd: Path, timeout: float, env: Mapping[str, str] | None = None
) -> Finished:
    """Run ``argv`` in its own session for at most ``timeout`` seconds (then
    its whole group is killed). Raises a one-line ``CheckpointError`` when
    it cannot start or times out."""
    try:
        # its own session: a timeout ends the command's children too (they hold the pipes)
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise CheckpointError(f"{what}: cannot run it: {exc.strerror}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CheckpointError(f"{what} timed out after {timeout:g} s") from None
    stderr = err.decode("utf-8", "replace").strip().splitlines()
    return Finished(proc.returncode, out, f": {stderr[-1].strip()[:200]}" if stderr else "")


def _run_reader(argv: list[str], what: str, cwd: Path, timeout: float) -> CounterReading:
    proc = run_bounded(argv, what, cwd, timeout)
    if proc.returncode == NO_CHECKPOINT_EXIT:
        return CounterReading(0, False, None)
    if proc.returncode != 0:
        raise CheckpointError(f"{what} exited {proc.returncode}{proc.last_error}")
    text = proc.out.decode("utf-8", "replace")
    try:
        return CounterReading(parse_counter(text, what), True, None)
    except CounterFormatError as exc:
        raise CheckpointError(
            f"{what} printed {exc.text!r}, not one integer (exit 0), nor exited {NO_CHECKPOINT_EXIT} for no checkpoint"
        ) from None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):  # not read: a child that left the group may hold them
        if pipe is not None:
            pipe.close()


def saved_at(reading: CounterReading) -> float | None:
    """When the app last saved: the mtime of the file holding the counter
    (None when the counter is not in a file, or the file is not there)."""
    if reading.file is None:
        return None
    try:
        return reading.file.stat().st_mtime
    except OSError:
        return None
