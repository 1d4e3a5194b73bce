"""The resume check: before the app starts, the checkpoint it would resume
from is verified; newer ones that fail are set aside (renamed into
``chain-set-aside/`` beside them, never deleted), each with a line in the
runner's log, and the app resumes from the newest that passes.

Verifying one checkpoint (``verify_one``): complete by its format's marker
(``DONE``, ``trainer_state.json``), then its structure where chain knows the
format (the shard sizes a ``DONE`` manifest lists, a Trainer state that is
JSON and names the same step, a ``chain.app`` file's header and length), then
``--verify-cmd`` (``$1`` and ``CHAIN_CHECKPOINT``: the checkpoint's path; exit
0: complete). The rules are ``chain.core.verify``'s; here are the reads, the
command and the renames. Everything read may be hostile: bounded reads that
never open a FIFO, ``stat`` calls that a link loop only fails.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chain.core.counterspec import CounterKind
from chain.core.records import RunnerRecord
from chain.core.settings import Settings
from chain.core.verify import (
    DONE_MARKER,
    HF_STATE,
    MAX_TRIED,
    SET_ASIDE_DIR,
    Candidate,
    Check,
    Marks,
    Verified,
    hf_state_problem,
    manifest_sizes,
    marks_complete,
    plan_resume,
    required_marker,
    set_aside_name,
    size_problem,
)
from chain.errors import CheckpointError
from chain.jobs.supervise import AppLock
from chain.primitives import bounded, safeio
from chain.store import ChainDir
from chain.store.counter import glob_marks, path_mode, path_stat, read_chain_counter, run_bounded

VERIFY_TIMEOUT = 600.0  # seconds --verify-cmd may take on one checkpoint (it may read gigabytes)
_JSON_CAP = 64 << 20  # bytes of a DONE manifest or trainer_state.json read at most
_HEADER_CAP = (1 << 20) + 64  # a chain.app file's magic and header line (chain.app.ckptfile)
_CHAIN_FILE_MAGIC = b"CHAINCKPT1\n"


@dataclass(frozen=True)
class ResumeCheck:
    """What the check did: lines for the runner's log, whether anything was
    set aside, and the one-line error that refuses the app's start ("": go on)."""

    lines: tuple[str, ...] = ()
    moved: bool = False
    error: str = ""


def verify_before_app(
    chain: ChainDir, settings: Settings, record: RunnerRecord, workdir: Path, say: Callable[[str], None]
) -> str:
    """The runner's check before the app starts, while no app of the chain
    runs (its app lock taken for the check; an earlier app still alive
    leaves everything as it is: the start waits for it). Says its lines,
    records where the app resumes when a checkpoint was set aside
    (``record.iter_resumed``: the counter chain recorded, ``iter_before``,
    is never lowered; the difference is work redone) and returns the one-line
    error that refuses the start ("" to go on)."""
    if not settings.verifies:
        return ""  # nothing chain can verify
    try:
        lock = AppLock(str(chain.root / "app.lock"))
    except OSError as exc:  # the app's start refuses it in its own words
        say(f"checkpoints not verified: cannot open the app lock: {exc.strerror}")
        return ""
    try:
        if not lock.acquire(until=0.0, clock=time.time, sleep=time.sleep):
            say("checkpoints not verified: an earlier app of this chain still runs")
            return ""
        check = check_resume(settings, workdir, when=int(time.time()))
    finally:
        lock.close()
    for line in check.lines:
        say(line)
    if check.error:
        return check.error
    if check.moved:
        try:
            record.iter_resumed = read_chain_counter(settings, workdir)
        except CheckpointError as exc:
            return str(exc)
    return ""


def check_resume(settings: Settings, workdir: Path, *, when: int, timeout: float = VERIFY_TIMEOUT) -> ResumeCheck:
    """Verify the newest checkpoints (a ``glob:`` counter lists them) down to
    the first that passes and set the ones before it aside; with another
    counter, ``--verify-cmd`` on the counter's own file, nothing to fall back to."""
    spec = settings.counter_spec
    if spec.kind is CounterKind.GLOB:
        found = glob_marks(spec, workdir)
        marked = any(m.has_done for m in found)
        verified: list[Verified] = []
        for marks in found[:MAX_TRIED]:
            verified.append(verify_one(marks, settings.verify_cmd, workdir, timeout, marked=marked))
            if verified[-1].check.usable:
                break
        plan = plan_resume(verified)
        if plan.error:
            return ResumeCheck(error=plan.error)
        return _set_aside(plan.set_aside, plan.resume, workdir, when)
    if not settings.verify_cmd:
        return ResumeCheck()
    if spec.kind is CounterKind.CMD:
        return ResumeCheck(("--verify-cmd not run: a shell command's counter names no checkpoint file",))
    path = workdir / (settings.ckpt_path if spec.kind is CounterKind.FILE else spec.path)
    if path_mode(path) is None:
        return ResumeCheck()  # no checkpoint yet
    failed = _run_verify(settings.verify_cmd, path, workdir, timeout)
    if failed:
        shown = _shown(path, workdir)
        return ResumeCheck(error=f"{shown} fails verification ({failed}); no earlier checkpoint is known")
    return ResumeCheck()


def verify_one(
    marks: Marks, verify_cmd: str, workdir: Path, timeout: float = VERIFY_TIMEOUT, *, marked: bool = False
) -> Verified:
    """One checkpoint's check: its marker (``marked``: its siblings have
    ``DONE``, so it needs one too), its structure, then ``verify_cmd``."""
    found, path = marks.candidate, Path(marks.candidate.path)
    if not marks_complete(marks, marked=marked):
        return Verified(found, Check.INCOMPLETE, _missing(path, marked=marked))
    problem = structure_problem(path, found.number)
    if problem:
        return Verified(found, Check.BROKEN, problem)
    if verify_cmd:
        failed = _run_verify(verify_cmd, path, workdir, timeout)
        if failed:
            return Verified(found, Check.REJECTED, failed)
    return Verified(found, Check.COMPLETE)


def structure_problem(path: Path, number: int) -> str:
    """Why a checkpoint of a format chain knows is not what it says ("" when
    it is, or when chain does not know its format)."""
    try:
        if _is_dir(path):
            if path_mode(path / DONE_MARKER) is not None:
                return _manifest_problem(path)
            if required_marker(path.name, is_dir=True, has_done=False) == HF_STATE:
                return hf_state_problem(_read_json(path / HF_STATE), number)
            return ""
        if path.name.endswith(".ckpt"):
            return _chain_file_problem(path)
    except OSError as exc:
        return f"cannot read it: {getattr(exc, 'strerror', None) or exc}"
    except ValueError as exc:  # not JSON, past a bound, not UTF-8
        return f"unreadable: {str(exc)[:120]}"
    return ""


def _manifest_problem(path: Path) -> str:
    sizes = manifest_sizes(_read_json(path / DONE_MARKER))
    if isinstance(sizes, str):
        return sizes
    found: dict[str, int | None] = {}
    for rel in sizes:
        shard = path_stat(path / rel)
        found[rel] = shard.st_size if shard is not None and stat.S_ISREG(shard.st_mode) else None
    return size_problem(sizes, found)


def _chain_file_problem(path: Path) -> str:
    """A ``chain.app`` single-file checkpoint: its magic, a header line that is
    a JSON object, and its length: header plus the payload length it gives."""
    fd = safeio.open_file(path)
    try:
        head = safeio.read_span(fd, 0, _HEADER_CAP)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if not head.startswith(_CHAIN_FILE_MAGIC):
        return ""  # not chain.app's format: nothing to say
    end = head.find(b"\n", len(_CHAIN_FILE_MAGIC))
    if end < 0:
        return "truncated header"
    header = bounded.loads_json(head[len(_CHAIN_FILE_MAGIC) : end])
    length = header.get("length") if isinstance(header, dict) else None
    if isinstance(length, bool) or not isinstance(length, int):
        return "header gives no payload length"
    if size != end + 1 + length:
        return f"{size} bytes, the header says {end + 1 + length}"
    return ""


def _read_json(path: Path) -> object:
    return bounded.loads_json(safeio.read_file(path, _JSON_CAP))


def _run_verify(command: str, path: Path, workdir: Path, timeout: float) -> str:
    """Run ``--verify-cmd`` on ``path``; why it failed ("" for exit 0)."""
    env = dict(os.environ, CHAIN_CHECKPOINT=str(path))
    try:
        done = run_bounded(["bash", "-c", command, "chain-verify", str(path)], "--verify-cmd", workdir, timeout, env)
    except CheckpointError as exc:
        return str(exc)
    return "" if done.returncode == 0 else f"--verify-cmd exited {done.returncode}{done.last_error}"


def _set_aside(items: tuple[Verified, ...], resume: Candidate | None, workdir: Path, when: int) -> ResumeCheck:
    lines: list[str] = []
    where = f"resuming from {_shown(Path(resume.path), workdir)}" if resume else "no checkpoint left: starting afresh"
    for item in items:
        source = Path(item.candidate.path)
        target = Path(set_aside_name(str(source), when))
        try:
            target.parent.mkdir(exist_ok=True)
            if target.parent.is_symlink() or not target.parent.is_dir():  # a planted link would lead elsewhere
                raise OSError(0, f"{SET_ASIDE_DIR} is not a directory of its own")
            if target.exists() or target.is_symlink():
                target = target.with_name(f"{target.name}.{os.getpid()}")
            os.rename(source, target)  # beside it: one rename, never a copy, never a delete
        except OSError as exc:
            reason = exc.strerror or exc
            return ResumeCheck(tuple(lines), bool(lines), f"cannot set aside {_shown(source, workdir)}: {reason}")
        lines.append(
            f"checkpoint {_shown(source, workdir)} {item.check.value} ({item.why}): "
            f"set aside as {_shown(target, workdir)}; {where}"
        )
    return ResumeCheck(tuple(lines), bool(lines))


def _missing(path: Path, *, marked: bool) -> str:
    mode = path_mode(path)
    if mode is None:
        return "gone, or a link that leads nowhere"
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        return f"{safeio.describe(mode)}, not a checkpoint"
    marker = DONE_MARKER if marked else required_marker(path.name, is_dir=True, has_done=False)
    return f"no {marker or DONE_MARKER}: a save cut short"


def _is_dir(path: Path) -> bool:
    mode = path_mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def _shown(path: Path, workdir: Path) -> str:
    try:
        return str(path.relative_to(workdir))
    except ValueError:
        return str(path)
