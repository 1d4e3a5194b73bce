"""StopMonitor: should the app checkpoint now, and should it stop?

Three sources, all re-read on every call (nothing is cached):

* a stop signal (``SIGTERM``/``SIGINT``; the runner sends ``$CHAIN_STOP_SIGNAL``).
  The handler only sets a flag: the app saves at its next step boundary,
  never from inside the handler, where the state may be half-updated;
* the runner's deadline ``$CHAIN_DEADLINE`` (epoch seconds), when it is
  within ``lead_seconds``;
* the downward-API files ``termination-warning-at`` and ``guaranteed-until``
  in ``/etc/podinfo`` (or ``$CHAIN_PODINFO``, or the constructor argument),
  following the user guide: an empty file is an absent annotation, a value
  that does not parse is ignored, and an instant in the past is stale.

``lead_seconds`` should come from the measured checkpoint cost (see
:mod:`chain.app.interval`): a save that starts too late produces nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from chain.app.contract import ExitCode, signal_named

__all__ = [
    "DEFAULT_PODINFO",
    "ExitCode",
    "StopMonitor",
    "StopReason",
    "StopStatus",
    "parse_instant",
]

log = logging.getLogger("chain.app.stop")

DEFAULT_PODINFO = Path("/etc/podinfo")
WARNING_FILE = "termination-warning-at"
GUARANTEE_FILE = "guaranteed-until"


class StopReason(Enum):
    """Why a checkpoint is wanted now."""

    SIGNAL = "signal"
    DEADLINE = "deadline"
    TERMINATION_WARNING = "termination-warning"
    GUARANTEE_ENDING = "guarantee-ending"


@dataclass(frozen=True)
class StopStatus:
    """One reading of every source."""

    reasons: frozenset[StopReason]
    signal: int | None
    warning_present: bool
    """A live (parseable, not stale) termination warning, whatever its distance."""
    guarantee_expired: bool
    """guaranteed-until is in the past: preemptible from now on, without notice
    this job controls.  Not a reason to stop; a reason to save more often."""
    message: str | None = None

    @property
    def expected(self) -> bool:
        """A checkpoint should be written now."""
        return bool(self.reasons)

    @property
    def exit_code(self) -> ExitCode | None:
        """The code to exit with after saving, or ``None`` to save and go on.

        A signal or the deadline means the runner is about to stop us: 99.
        A termination warning alone: 75, stopping voluntarily hands back the
        capacity.  The guarantee ending alone is not a stop: the job keeps
        running until the capacity is needed, so exiting would waste run time.
        """
        if self.reasons & {StopReason.SIGNAL, StopReason.DEADLINE}:
            return ExitCode.STOPPED
        if StopReason.TERMINATION_WARNING in self.reasons:
            return ExitCode.TEMPFAIL
        return None


def parse_instant(raw: str | None) -> datetime | None:
    """Parse an annotation value: ISO 8601 (``Z`` accepted, no zone = UTC) or
    epoch seconds.  ``None`` for anything that does not parse."""
    if raw is None:
        return None
    text = raw.strip()
    if not text:
        return None
    try:
        return datetime.fromtimestamp(float(text), tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        pass
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"  # fromisoformat accepts Z only from 3.11
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        return None
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=timezone.utc)
    return instant


class StopMonitor:
    """Tracks stop signals, the runner deadline and podinfo warnings.

    Create one, :meth:`install` it (or use it as a context manager, which
    restores the previous handlers), and call :meth:`status` or
    :meth:`stop_expected` at every step boundary.

    ``podinfo``: directory of the downward-API files; default ``$CHAIN_PODINFO``
    or ``/etc/podinfo``.  ``deadline``: epoch seconds; default
    ``$CHAIN_DEADLINE``.  ``stale_grace_seconds``: how far in the past a
    termination warning may lie before it counts as stale (default 0: any
    past instant is stale).  ``warning_margin_seconds``: added to the lead for
    the podinfo instants only (default 60, the guide's ``2 * C + 60``): the
    deadline is exact, but a warning reaches the container late (the kubelet
    refreshes the files about 2 minutes into the notice) and names only the
    earliest possible stop.  ``clock``: epoch seconds, injectable for tests.
    """

    def __init__(
        self,
        podinfo: str | os.PathLike[str] | None = None,
        *,
        deadline: float | None = None,
        signals: Iterable[signal.Signals] | None = None,
        stale_grace_seconds: float = 0.0,
        warning_margin_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
        environ: dict[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.podinfo = Path(podinfo if podinfo is not None else env.get("CHAIN_PODINFO") or DEFAULT_PODINFO)
        self.deadline = deadline if deadline is not None else self._env_deadline(env.get("CHAIN_DEADLINE"))
        if signals is None:
            # Both, whatever the runner sends: a Ctrl-C by hand should save too.
            wanted = [signal.SIGTERM, signal.SIGINT]
            named = signal_named(env.get("CHAIN_STOP_SIGNAL", ""))
            if named is not None and named not in wanted:
                wanted.append(named)
            signals = wanted
        self.signals = tuple(signals)
        self.stale_grace_seconds = stale_grace_seconds
        self.warning_margin_seconds = warning_margin_seconds
        self._clock = clock
        self._received: int | None = None  # the one flag the handler sets
        self._previous: dict[signal.Signals, Any] = {}
        self._urgent_last = False

    @staticmethod
    def _env_deadline(raw: str | None) -> float | None:
        if raw is None or not raw.strip():
            return None
        try:
            return float(raw)
        except ValueError:
            log.warning("ignoring unparseable CHAIN_DEADLINE=%r", raw)
            return None

    # ----------------------------------------------------------------- signals

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self._received = signum

    def install(self) -> StopMonitor:
        """Install the flag-setting handlers (main thread only)."""
        for sig in self.signals:
            if sig not in self._previous:
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def uninstall(self) -> None:
        """Restore the handlers that were there before :meth:`install`."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def __enter__(self) -> StopMonitor:  # noqa: PYI034 - typing.Self needs 3.11
        return self.install()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.uninstall()

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Behave as if ``signum`` had arrived (for tests and in-app triggers)."""
        self._received = signum

    @property
    def signal_received(self) -> int | None:
        """The last stop signal received, if any."""
        return self._received

    # ----------------------------------------------------------------- podinfo

    def _read(self, name: str) -> str | None:
        try:
            raw = (self.podinfo / name).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None  # missing file or directory: the annotation is absent
        return raw or None  # empty file: the annotation is absent

    def _instant(self, name: str) -> datetime | None:
        raw = self._read(name)
        instant = parse_instant(raw)
        if raw is not None and instant is None:
            log.debug("ignoring unparseable %s=%r", name, raw)
        return instant

    # ------------------------------------------------------------------ status

    def status(self, lead_seconds: float) -> StopStatus:
        """Read every source now and say what is pending.

        ``lead_seconds`` is how long a save needs (e.g. two measured saves);
        the deadline counts when it is that close, a podinfo instant when it
        is within ``lead_seconds + warning_margin_seconds``.
        """
        now = self._clock()
        warn_lead = lead_seconds + self.warning_margin_seconds
        reasons: set[StopReason] = set()
        if self._received is not None:
            reasons.add(StopReason.SIGNAL)
        if self.deadline is not None and self.deadline - now <= lead_seconds:
            reasons.add(StopReason.DEADLINE)

        warning_present = False
        message: str | None = None
        warn = self._instant(WARNING_FILE)
        if warn is not None:
            until = warn.timestamp() - now
            if until < -self.stale_grace_seconds:
                log.debug("ignoring stale %s (%.0f s in the past)", WARNING_FILE, -until)
            else:
                warning_present = True
                message = self._read("termination-warning-message")
                if until <= warn_lead:
                    reasons.add(StopReason.TERMINATION_WARNING)

        guarantee_expired = False
        guaranteed = self._instant(GUARANTEE_FILE)
        if guaranteed is not None:
            until = guaranteed.timestamp() - now
            if until < 0:
                guarantee_expired = True
            elif until <= warn_lead:
                reasons.add(StopReason.GUARANTEE_ENDING)

        return StopStatus(
            reasons=frozenset(reasons),
            signal=self._received,
            warning_present=warning_present,
            guarantee_expired=guarantee_expired,
            message=message,
        )

    def stop_expected(self, lead_seconds: float) -> bool:
        """True when a stop is close enough that a checkpoint should be written."""
        return self.status(lead_seconds).expected

    def warning_present(self) -> bool:
        """True while a live termination warning is on the pod (for logging)."""
        return self.status(0.0).warning_present

    def urgent_save_due(self, status: StopStatus) -> bool:
        """Debounce: True once per episode in which ``status.expected`` holds.

        Feed it the status read at each step boundary.  It tracks the current
        value rather than latching the first one, so the urgent save fires
        once per warning episode, and again if the warning clears and returns.
        """
        due = status.expected and not self._urgent_last
        self._urgent_last = status.expected
        return due
