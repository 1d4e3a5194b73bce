"""CheckpointStore: numbered checkpoints with retention, fallback and the counter.

Layout of the store directory::

    ckpt-000000000120.ckpt      single-file checkpoint (header + payload)
    ckpt-000000000130.d/        sharded checkpoint, complete only with DONE
    .tmp-...                    temporaries of a save in progress (ignored)
    ckpt-000000000110.ckpt.corrupt   quarantined after failing to load

The number is the step: how many iterations the checkpointed state has
completed, the same number the progress counter (``CKPT_PATH``) holds.

Order of a save, which is what makes it safe to kill at any instant:

1. the new checkpoint is written to a temporary and published atomically;
2. the progress counter is written (never ahead of a complete checkpoint);
3. only then are checkpoints outside the retention set deleted.

Resume (:meth:`CheckpointStore.restore`) loads the newest complete checkpoint
and falls back to the previous one on any load error, logging why.  A
checkpoint whose content fails its checksum is renamed ``*.corrupt`` (kept as
evidence, no longer listed) so that retention does not count it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chain.app.atomic import (
    TMP_PREFIX,
    CounterFormatError,
    publish_dir,
    read_counter,
    read_done_marker,
    sha256_file,
    write_bytes_atomic,
    write_counter,
)
from chain.app.ckptfile import CorruptCheckpoint, encode, read_header, split
from chain.app.ckptinfo import (
    NAME_RE,
    CheckpointInfo,
    CheckpointKind,
    DirWriter,
    Loader,
    MetricMode,
    Restored,
    check_step,
    ckpt_name,
    keep_from_env,
    remove_checkpoint,
)
from chain.app.serial import JsonSerializer, Serializer

__all__ = [
    "CheckpointInfo",
    "CheckpointKind",
    "CheckpointStore",
    "CorruptCheckpoint",
    "MetricMode",
    "Restored",
]

log = logging.getLogger("chain.app.store")


class CheckpointStore:
    """Numbered checkpoints in one directory: keep the last ``keep_last`` plus
    the best by a metric, publish the progress counter after each save.

    ``counter_path`` is the progress-counter file (``CKPT_PATH``); ``None``
    disables it.  ``serializer`` encodes single-file states (JSON by default;
    see :mod:`chain.app.serial` about pickle).  ``durable=False`` skips fsync
    (for tests and throwaway runs only).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        keep_last: int = 2,
        keep_best: bool = True,
        metric_mode: MetricMode = MetricMode.MIN,
        serializer: Serializer | None = None,
        counter_path: str | os.PathLike[str] | None = None,
        durable: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if keep_last < 1:
            # Fewer than one kept checkpoint would delete the one just written.
            raise ValueError("keep_last must be at least 1")
        self.root = Path(root)
        self.keep_last = keep_last
        self.keep_best = keep_best
        self.metric_mode = metric_mode
        self.serializer: Serializer = serializer or JsonSerializer()
        self.counter_path = Path(counter_path) if counter_path is not None else None
        self.durable = durable
        self._clock = clock
        self.root.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls, root: str | os.PathLike[str], **kwargs: Any) -> CheckpointStore:
        """A store whose progress counter is ``$CKPT_PATH`` (when set) and
        which keeps the last ``$CHAIN_KEEP_CHECKPOINTS`` (``--keep-checkpoints``; default 2)."""
        kwargs.setdefault("counter_path", os.environ.get("CKPT_PATH") or None)
        kwargs.setdefault("keep_last", keep_from_env())
        return cls(root, **kwargs)

    # ----------------------------------------------------------------- listing

    def _read_info(self, path: Path, step: int, kind: CheckpointKind) -> CheckpointInfo | None:
        """Info from a file header or DONE manifest; None when incomplete."""
        if kind is CheckpointKind.DIR:
            try:
                manifest = read_done_marker(path)
            except (OSError, ValueError) as exc:
                log.warning("ignoring %s: unreadable DONE marker (%s)", path, exc)
                return None
            if manifest is None:
                return None  # shards without DONE: an interrupted save
            header = manifest.get("meta", {})
        else:
            try:
                header = read_header(path)
            except (OSError, CorruptCheckpoint) as exc:
                log.warning("ignoring %s: %s", path, exc)
                return None
        metric = header.get("metric")
        return CheckpointInfo(
            step=step,
            path=path,
            kind=kind,
            metric=float(metric) if isinstance(metric, (int, float)) else None,
            wall_time=header.get("wall_time"),
            meta=header.get("meta") or {},
        )

    def checkpoints(self) -> list[CheckpointInfo]:
        """Complete checkpoints, oldest step first."""
        found: list[CheckpointInfo] = []
        for entry in self.root.iterdir():
            m = NAME_RE.fullmatch(entry.name)
            if m is None:
                continue
            info = self._read_info(entry, int(m.group(1)), CheckpointKind(m.group(2)))
            if info is not None:
                found.append(info)
        found.sort(key=lambda i: (i.step, i.kind is CheckpointKind.DIR))
        return found

    def latest(self) -> CheckpointInfo | None:
        """The newest complete checkpoint (not verified; see :meth:`restore`)."""
        infos = self.checkpoints()
        return infos[-1] if infos else None

    def best(self) -> CheckpointInfo | None:
        """The complete checkpoint with the best metric, if any has one."""
        return self._best(self.checkpoints())

    def _best(self, infos: list[CheckpointInfo]) -> CheckpointInfo | None:
        scored = [i for i in infos if i.metric is not None]
        if not scored:
            return None
        sign = 1.0 if self.metric_mode is MetricMode.MIN else -1.0
        # Ties go to the newer checkpoint: it carries more training.
        return min(reversed(scored), key=lambda i: sign * (i.metric or 0.0))

    # ------------------------------------------------------------------ saving

    def _header(self, step: int, metric: float | None, meta: Mapping[str, Any] | None) -> dict[str, Any]:
        return {
            "format": 1,
            "step": step,
            "metric": metric,
            "wall_time": self._clock(),
            "meta": dict(meta or {}),
        }

    def save(
        self,
        step: int,
        state: Any,
        *,
        metric: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo:
        """Save ``state`` as the single-file checkpoint for ``step``, publish the
        counter, then apply retention.  ``meta`` (JSON) is stored in the header:
        put the run's configuration there so the checkpoint can be identified.
        """
        check_step(step)
        payload = self.serializer.dumps(state)
        header = self._header(step, metric, meta)
        header.update(
            serializer=self.serializer.name,
            length=len(payload),
            sha256=hashlib.sha256(payload).hexdigest(),
        )
        path = self.root / ckpt_name(step, CheckpointKind.FILE)
        write_bytes_atomic(path, encode(header, payload), durable=self.durable)
        return self._committed(path, step, CheckpointKind.FILE, metric, header)

    def save_dir(
        self,
        step: int,
        write: DirWriter,
        *,
        metric: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CheckpointInfo:
        """Save a sharded checkpoint: ``write(scratch_dir)`` writes the shards;
        the directory is published with a DONE manifest written last."""
        check_step(step)
        header = self._header(step, metric, meta)
        path = self.root / ckpt_name(step, CheckpointKind.DIR)
        with publish_dir(path, meta=header) as scratch:
            write(scratch)
        return self._committed(path, step, CheckpointKind.DIR, metric, header)

    def _committed(
        self,
        path: Path,
        step: int,
        kind: CheckpointKind,
        metric: float | None,
        header: dict[str, Any],
    ) -> CheckpointInfo:
        # The checkpoint is complete and durable: only now may the counter move.
        if self.counter_path is not None:
            write_counter(self.counter_path, step)
        info = CheckpointInfo(step, path, kind, metric, header["wall_time"], header["meta"])
        self.prune()
        return info

    # --------------------------------------------------------------- retention

    def retained(self, infos: list[CheckpointInfo]) -> list[CheckpointInfo]:
        """The subset of ``infos`` that retention keeps."""
        keep = {i.path for i in infos[-self.keep_last :]}
        best = self._best(infos) if self.keep_best else None
        if best is not None:
            keep.add(best.path)
        return [i for i in infos if i.path in keep]

    def prune(self) -> list[Path]:
        """Delete complete checkpoints outside the retention set; return them.

        Incomplete entries (no DONE, bad header) are not touched here: they
        may be a concurrent save in progress; :meth:`cleanup_temporaries`
        handles leftovers at startup.
        """
        infos = self.checkpoints()
        keep = {i.path for i in self.retained(infos)}
        removed: list[Path] = []
        for info in infos:
            if info.path not in keep:
                remove_checkpoint(info.path)
                removed.append(info.path)
                log.info("retention: removed %s", info.path.name)
        return removed

    def cleanup_temporaries(self) -> list[Path]:
        """Remove temporaries left by an interrupted save (call at startup,
        when no save of this store can be in progress)."""
        removed: list[Path] = []
        for entry in self.root.iterdir():
            if entry.name.startswith(TMP_PREFIX):
                remove_checkpoint(entry)
                removed.append(entry)
                log.info("removed leftover temporary %s", entry.name)
        return removed

    # ----------------------------------------------------------------- loading

    def load(self, info: CheckpointInfo, loader: Loader | None = None) -> Any:
        """Load and verify one checkpoint.

        Files are checked against the length and SHA-256 in their header and
        decoded with the store's serializer.  Directories are checked against
        their DONE manifest; then ``loader(dir)`` is called, or, without a
        loader, a ``{relative path: bytes}`` dict is returned.  Raises
        :class:`CorruptCheckpoint` when the content does not match.
        """
        if info.kind is CheckpointKind.DIR:
            return self._load_dir(info.path, loader)
        if loader is not None:
            return loader(info.path)
        data = info.path.read_bytes()
        header, payload = split(data, info.path)
        if header.get("serializer") != self.serializer.name:
            raise ValueError(
                f"{info.path.name}: written with serializer {header.get('serializer')!r},"
                f" store uses {self.serializer.name!r}"
            )
        if len(payload) != header.get("length"):
            raise CorruptCheckpoint(f"{info.path.name}: payload length {len(payload)} != {header.get('length')}")
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise CorruptCheckpoint(f"{info.path.name}: payload checksum mismatch")
        try:
            return self.serializer.loads(payload)
        except ValueError as exc:
            raise CorruptCheckpoint(f"{info.path.name}: cannot decode payload: {exc}") from exc

    def _load_dir(self, path: Path, loader: Loader | None) -> Any:
        manifest = read_done_marker(path)
        if manifest is None:
            raise CorruptCheckpoint(f"{path.name}: no DONE marker")
        files = manifest.get("files", {})
        for rel, want in files.items():
            shard = path / rel
            if not shard.is_file():
                raise CorruptCheckpoint(f"{path.name}: shard {rel} missing")
            if shard.stat().st_size != want.get("size") or sha256_file(shard) != want.get("sha256"):
                raise CorruptCheckpoint(f"{path.name}: shard {rel} does not match DONE manifest")
        if loader is not None:
            return loader(path)
        return {rel: (path / rel).read_bytes() for rel in files}

    def quarantine(self, info: CheckpointInfo) -> Path:
        """Rename a bad checkpoint to ``*.corrupt``: kept for inspection, no
        longer listed, so retention and resume stop counting on it."""
        target = info.path.with_name(info.path.name + ".corrupt")
        if target.exists():
            remove_checkpoint(target)
        os.replace(info.path, target)
        return target

    def restore(self, loader: Loader | None = None, *, sync_counter: bool = True) -> Restored | None:
        """Load the newest checkpoint that loads, falling back to older ones.

        Every skipped checkpoint is logged with the reason and listed in
        :attr:`Restored.skipped`; corrupt ones are quarantined.  With
        ``sync_counter`` the progress counter is set to the restored step (0
        when nothing could be restored), so it never claims progress that no
        loadable checkpoint holds.
        """
        skipped: list[str] = []
        result: Restored | None = None
        for info in reversed(self.checkpoints()):
            try:
                state = self.load(info, loader)
            except CorruptCheckpoint as exc:
                why = f"corrupt: {exc}; quarantined"
                log.warning("resume: %s, falling back to the previous checkpoint", why)
                with contextlib.suppress(OSError):
                    self.quarantine(info)
                skipped.append(why)
                continue
            except Exception as exc:  # noqa: BLE001 - a user loader may raise anything
                why = f"{info.path.name}: load failed ({type(exc).__name__}: {exc})"
                log.warning("resume: %s, falling back to the previous checkpoint", why)
                skipped.append(why)
                continue
            log.info("resume: loaded %s (step %d)", info.path.name, info.step)
            result = Restored(info, state, tuple(skipped))
            break
        if result is None and skipped:
            log.error("resume: no loadable checkpoint in %s", self.root)
        if sync_counter and self.counter_path is not None:
            self._sync_counter(result.info.step if result else 0)
        return result

    def _sync_counter(self, step: int) -> None:
        try:
            current = read_counter(self.counter_path)  # type: ignore[arg-type]
        except CounterFormatError as exc:
            log.warning("progress counter unreadable (%s); rewriting it", exc)
            current = -1
        if current is None and step == 0:
            return  # a fresh run: nothing to say yet
        if current != step:
            log.warning("progress counter %s -> %d to match the restored checkpoint", current, step)
            write_counter(self.counter_path, step)  # type: ignore[arg-type]
