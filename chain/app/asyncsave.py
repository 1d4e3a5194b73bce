"""Asynchronous saves: the step loop continues while a thread writes.

The state is staged (copied) synchronously, so the loop may mutate its own
objects at once; the copy is what the background thread writes.  Only one
save is outstanding at a time: :meth:`AsyncSaver.submit` first waits for the
previous one, otherwise host memory grows by one checkpoint per pending save.
A save that was never waited on is not a checkpoint: call :meth:`wait`
(or leave the ``with`` block) before exiting, in particular on a stop signal.

Counter ordering still holds: :meth:`CheckpointStore.save` writes the counter
only after the checkpoint is complete, inside the background thread.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from types import TracebackType
from typing import Any

__all__ = ["AsyncSaver"]

log = logging.getLogger("chain.app.asyncsave")


class AsyncSaver:
    """Runs ``save(staged_state)`` in one background thread, one at a time.

    ``stage`` makes the copy handed to the thread (``copy.deepcopy`` by
    default; pass a cheaper function if the state has one).
    """

    def __init__(self, stage: Callable[[Any], Any] = copy.deepcopy) -> None:
        self._stage = stage
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chain-save")
        self._pending: Future[Any] | None = None

    @property
    def pending(self) -> bool:
        """A save was submitted and not yet waited on."""
        return self._pending is not None

    def submit(self, save: Callable[[Any], Any], state: Any) -> None:
        """Wait for the previous save, stage ``state``, start ``save`` on it.

        An error of the previous save is raised here (it was never a
        checkpoint, and the caller must know).
        """
        self.wait()
        staged = self._stage(state)
        self._pending = self._pool.submit(save, staged)

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the outstanding save (if any) finishes; return its
        result or raise its exception."""
        future, self._pending = self._pending, None
        if future is None:
            return None
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:  # not the builtin TimeoutError before 3.11
            self._pending = future  # still outstanding
            raise

    def close(self) -> None:
        """Wait for the outstanding save and stop the thread."""
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)

    def __enter__(self) -> AsyncSaver:  # noqa: PYI034 - typing.Self needs 3.11
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close()
            return
        # Already failing: still flush the save, but do not mask the error.
        try:
            self.close()
        except Exception:
            log.exception("asynchronous save failed while handling another error")
