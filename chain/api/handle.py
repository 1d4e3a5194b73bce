"""``Chain``: the Python API for one chain, and so for sweeps of chains.

    from chain import Chain

    runs = [Chain.submit(workdir=f"runs/lr{lr}", app_cmd=f"python3 train.py --lr {lr}",
                         max_iter=500, runner_time="24:00:00") for lr in (1e-3, 3e-4, 1e-4)]
    finals = [run.wait() for run in runs]

Every setting of ``chain submit`` is a keyword by its TOML name, validated
the same way; errors are ``ChainError``s, as on the command line. One
keyword of the API itself is also a setting: ``backend=`` takes the setting's
value (``"slurm"``, ``"local"``, ``"auto"``) or a ``Backend`` object. The
others never share a setting's name (``notify`` is the setting; the lines for
a person go to ``on_message``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from chain.api.cancelling import cancel as cancel_chain
from chain.api.config import CHAIN_DIR_NAME, LimitsMemo, resolve_chain_dir
from chain.api.status import StatusReport, open_chain, status_report, wait_jobs_gone
from chain.api.submission import submit as submit_chain
from chain.backends.base import Backend
from chain.core.fields import FIELD_BY_NAME
from chain.errors import ChainError, ConfigError, SchedulerError
from chain.store import ChainDir


class Chain:
    """A chain directory: submit, look at, wait for, cancel, resume."""

    def __init__(self, chain_dir: str | os.PathLike[str], *, backend: Backend | None = None) -> None:
        self.chain_dir = Path(chain_dir).resolve()
        self._backend = backend  # None: the chain's own backend (tests and embedding give one)
        open_chain(self.chain_dir)  # a one-line error when there is no chain

    @classmethod
    def submit(
        cls,
        workdir: str | os.PathLike[str] = ".",
        *,
        chain_dir: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | None = None,
        environ: dict[str, str] | None = None,
        backend: str | Backend | None = None,
        on_message: Callable[[str], None] | None = None,
        limits: LimitsMemo | None = None,
        **settings: Any,
    ) -> Chain:
        """Submit a new chain running in ``workdir`` (created if missing;
        removed again if this call made it and the submit fails).

        ``settings`` are the settings by their TOML names (``app_cmd``,
        ``max_iter``, ``runner_time``, ``hooks``, ``notify``, ``backend``,
        ...); ``environ`` the environment layer (by default none: a script's
        settings are its own); ``backend`` the setting (``"slurm"``,
        ``"local"``, ``"auto"``), or a ``Backend`` object to use as it is; ``on_message``
        receives the lines ``chain submit`` prints for a person; ``limits`` a
        ``LimitsMemo`` shared by the submissions of one batch, which then ask
        the site's job limits once (``submit_many`` and sweeps do this).
        """
        given = backend if isinstance(backend, Backend) else None
        if isinstance(backend, str):
            settings["backend"] = backend
        _check_setting_names(settings)
        work = Path(workdir).resolve()
        made = _missing_parents(work)
        work.mkdir(parents=True, exist_ok=True)
        directory = Path(chain_dir).resolve() if chain_dir else work / CHAIN_DIR_NAME
        try:
            submit_chain(
                settings,
                environ or {},
                config=Path(config) if config else None,
                chain_dir=directory,
                workdir=work,
                notify=on_message,
                backend=given,
                limits=limits,
            )
        except BaseException:
            _remove_made(made, directory)
            raise
        return cls(directory, backend=given)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, backend: Backend | None = None) -> Chain:
        """The chain in ``path``: a chain directory, or a working directory
        holding one in ``.chain``."""
        return cls(resolve_chain_dir(Path(path)), backend=backend)

    @staticmethod
    def submit_many(
        specs: Iterable[Mapping[str, Any]], *, parallel: int = 4, backend: Backend | None = None
    ) -> list[Chain]:
        """Submit a sweep: ``Chain.submit(**spec)`` for each spec, at most
        ``parallel`` at once (``chain.api.sweep.submit_many``)."""
        from chain.api.sweep import submit_many

        return submit_many(specs, parallel=parallel, backend=backend)

    @staticmethod
    def wait_all(
        chains: Sequence[Chain],
        timeout: float | None = None,
        poll: float = 10.0,
        *,
        check: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> list[StatusReport]:
        """Wait for a sweep: the chains' own files every ``poll`` seconds, and
        one scheduler query for all of them every ``check`` seconds
        (``chain.api.sweep.wait_all``); their final status reports."""
        from chain.api.sweep import wait_all

        backends = {id(c._backend) for c in chains}
        backend = chains[0]._backend if chains and len(backends) == 1 else None
        return wait_all(chains, timeout=timeout, poll=poll, check=check, sleep=sleep, clock=clock, backend=backend)

    @property
    def chain_id(self) -> str:
        return open_chain(self.chain_dir).status.chain_id

    def status(self, history: int | None = None) -> StatusReport:
        """The typed status report (``chain status --json`` is its ``to_json()``)."""
        return status_report(self.chain_dir, history=history, backend=self._backend)

    def wait(
        self,
        timeout: float | None = None,
        poll: float = 5.0,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> StatusReport:
        """Wait until the chain has ended; its final status. A ``ChainError``
        after ``timeout`` seconds (the chain goes on), or at once when its
        jobs were cancelled outside chain (``scancel``) with none left to
        end it (``chain cancel`` closes it, ``resume()`` continues it), or
        whose jobs Slurm failed before chain started in them
        (``StatusReport.cannot_start``: a ``SchedulerError``)."""
        give_up = None if timeout is None else clock() + timeout
        while True:
            report = status_report(self.chain_dir, history=0, backend=self._backend, watching=True)
            if report.state.ended:
                wait_jobs_gone(self.chain_dir, backend=self._backend, sleep=sleep, clock=clock)
                return report
            if report.cancelled_outside:
                raise ChainError(
                    f"chain {report.chain_id}: {report.cancelled_outside}, and nothing of it runs: "
                    "chain cancel closes it, chain submit --resume continues it"
                )
            if report.cannot_start:
                raise SchedulerError(
                    f"chain {report.chain_id}: {report.never_started_text} and nothing of it runs "
                    "(chain status says more): chain submit --resume continues it once its jobs can start"
                )
            if give_up is not None and clock() >= give_up:
                raise ChainError(f"chain {report.chain_id} still {report.state.value} after {timeout:.0f}s")
            sleep(poll)

    def cancel(self) -> str:
        """Stop the submitter and the runner (the app may checkpoint)."""
        return cancel_chain(self.chain_dir, backend=self._backend)

    def resume(
        self,
        *,
        environ: dict[str, str] | None = None,
        on_message: Callable[[str], None] | None = None,
        reset_excluded: bool = False,
        limits: LimitsMemo | None = None,
        **overrides: Any,
    ) -> Chain:
        """Continue the chain from its checkpoint with its stored settings,
        ``overrides`` changing them (e.g. ``max_iter=1000`` to extend);
        ``on_message`` and ``limits`` as for ``submit``; ``reset_excluded``:
        use again the nodes the chain excluded."""
        _check_setting_names(overrides)
        status = open_chain(self.chain_dir).status
        submit_chain(
            overrides,
            environ or {},
            config=None,
            chain_dir=self.chain_dir,
            workdir=Path(status.workdir),
            resume=True,
            notify=on_message,
            backend=self._backend,
            reset_excluded=reset_excluded,
            limits=limits,
        )
        return self

    def report(self) -> list[Path]:
        """Write the usage CSV, summary and progress plot; their paths."""
        from chain.reporting.report import make_report

        return make_report(self.chain_dir, echo=False)

    def __repr__(self) -> str:
        return f"Chain({str(self.chain_dir)!r})"


def _check_setting_names(settings: dict[str, Any]) -> None:
    unknown = sorted(set(settings) - set(FIELD_BY_NAME))
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r}")


def _missing_parents(path: Path) -> Path | None:
    """The outermost directory of ``path`` (itself included) that does not
    exist yet: what ``mkdir(parents=True)`` is about to make."""
    made = None
    while not path.exists() and path != path.parent:
        made, path = path, path.parent
    return made


def _remove_made(made: Path | None, chain_dir: Path) -> None:
    """Remove the directories a failed submit made for its working directory
    (nothing that was there before: only a tree this call created), unless
    a job of the chain was queued before the failure (it runs there)."""
    if made is None or not made.is_dir():
        return
    try:
        status = ChainDir(chain_dir).load_status()
    except ChainError:
        status = None
    if status is not None and status.named_jobs():
        return
    shutil.rmtree(made, ignore_errors=True)
