"""``Chain``: the Python API for one chain, and so for sweeps of chains.

    from chain import Chain

    runs = [Chain.submit(workdir=f"runs/lr{lr}", app_cmd=f"python3 train.py --lr {lr}",
                         max_iter=500, runner_time="24:00:00") for lr in (1e-3, 3e-4, 1e-4)]
    finals = [run.wait() for run in runs]

Every setting of ``chain submit`` is a keyword by its TOML name, validated
the same way; errors are ``ChainError``s, as on the command line.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from chain.api.cancelling import cancel as cancel_chain
from chain.api.status import StatusReport, open_chain, status_report
from chain.api.submission import submit as submit_chain
from chain.backends.base import Backend
from chain.core.settings import FIELD_BY_NAME
from chain.errors import ChainError, ConfigError

CHAIN_DIR_NAME = ".chain"


class Chain:
    """A chain directory: submit, look at, wait for, cancel, resume."""

    def __init__(self, chain_dir: str | os.PathLike[str], *, scheduler: Backend | None = None) -> None:
        self.chain_dir = Path(chain_dir).resolve()
        self._backend = scheduler  # None: the chain's own backend (tests and embedding give one)
        open_chain(self.chain_dir)  # a one-line error when there is no chain

    @classmethod
    def submit(cls, workdir: str | os.PathLike[str] = ".", *, chain_dir: str | os.PathLike[str] | None = None,
               config: str | os.PathLike[str] | None = None, environ: dict[str, str] | None = None,
               scheduler: Backend | None = None, notify: Callable[[str], None] | None = None,
               **settings: Any) -> Chain:
        """Submit a new chain running in ``workdir`` (created if missing).

        ``settings`` are the settings by their TOML names (``app_cmd``,
        ``max_iter``, ``runner_time``, ``hooks``, ``backend``, ...); ``environ``
        the environment layer (by default none: a script's settings are its
        own); ``scheduler`` a ``Backend`` object to use instead of the one
        the ``backend`` setting chooses.
        """
        unknown = sorted(set(settings) - set(FIELD_BY_NAME))
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r}")
        work = Path(workdir).resolve()
        work.mkdir(parents=True, exist_ok=True)
        directory = Path(chain_dir).resolve() if chain_dir else work / CHAIN_DIR_NAME
        submit_chain(settings, environ or {}, config=Path(config) if config else None, chain_dir=directory,
                     workdir=work, notify=notify, backend=scheduler)
        return cls(directory, scheduler=scheduler)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, scheduler: Backend | None = None) -> Chain:
        """The chain in ``path``: a chain directory, or a working directory
        holding one in ``.chain``."""
        root = Path(path)
        if not (root / "state.json").is_file() and (root / CHAIN_DIR_NAME / "state.json").is_file():
            root = root / CHAIN_DIR_NAME
        return cls(root, scheduler=scheduler)

    @property
    def chain_id(self) -> str:
        return open_chain(self.chain_dir)[1].chain_id

    def status(self, history: int | None = None) -> StatusReport:
        """The typed status report (``chain status --json`` is its ``to_json()``)."""
        return status_report(self.chain_dir, history=history, backend=self._backend)

    def wait(self, timeout: float | None = None, poll: float = 5.0, *,
             sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic) -> StatusReport:
        """Wait until the chain has ended; its final status. A ``ChainError``
        after ``timeout`` seconds (the chain goes on)."""
        give_up = None if timeout is None else clock() + timeout
        while True:
            report = self.status(history=0)
            if report.state.ended:
                return report
            if give_up is not None and clock() >= give_up:
                raise ChainError(f"chain {report.chain_id} still {report.state.value} after {timeout:.0f}s")
            sleep(poll)

    def cancel(self) -> str:
        """Stop the submitter and the runner (the app may checkpoint)."""
        return cancel_chain(self.chain_dir, backend=self._backend)

    def resume(self, *, environ: dict[str, str] | None = None, notify: Callable[[str], None] | None = None,
               **overrides: Any) -> Chain:
        """Continue the chain from its checkpoint with its stored settings,
        ``overrides`` changing them (e.g. ``max_iter=1000`` to extend)."""
        unknown = sorted(set(overrides) - set(FIELD_BY_NAME))
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r}")
        _, status = open_chain(self.chain_dir)
        submit_chain(overrides, environ or {}, config=None, chain_dir=self.chain_dir,
                     workdir=Path(status.workdir), resume=True, notify=notify, backend=self._backend)
        return self

    def report(self) -> list[Path]:
        """Write the usage CSV, summary and progress plot; their paths."""
        from chain.reporting.report import make_report

        return make_report(self.chain_dir, echo=False)

    def __repr__(self) -> str:
        return f"Chain({str(self.chain_dir)!r})"
