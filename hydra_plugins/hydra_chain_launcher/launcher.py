"""``ChainLauncher``: Hydra's launcher for ``hydra/launcher=chain``.

``launch`` turns the batch of jobs Hydra's sweeper gives into points of the
chain sweep in ``hydra.sweep.dir`` (``jobs``), submits the new ones and
resumes the unfinished ones (``Sweep.resume``: running and completed points
are left alone), then, with ``wait`` (the default), waits for the chains to
end and returns a ``JobReturn`` per job: completed, with the value its
last run returned (``_callback``), or failed with the chain's state and
reason. Every error is one line (``LauncherError``:
Hydra prints it without a traceback and exits 1).
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from chain.errors import ChainError
from chain.sweep.naming import check_dir_name
from hydra_plugins.hydra_chain_launcher._callback import read_return_value
from hydra_plugins.hydra_chain_launcher._command import (
    AppCall,
    app_template,
    config_args,
    kept_hydra_overrides,
    main_target,
)
from hydra_plugins.hydra_chain_launcher._jobs import HydraJob, merged
from hydra_plugins.hydra_chain_launcher._mapping import chain_settings, launcher_options

if TYPE_CHECKING:
    from chain.sweep.table import PointRow

log = logging.getLogger(__name__)


class LauncherError(CompactHydraException):
    """A problem of the launcher's, in one line (Hydra prints it without a traceback)."""


class JobNotCompleted(CompactHydraException):
    """A job's chain ended without completing: its ``JobReturn``'s error."""


class ChainLauncher(Launcher):
    """Each job of a Hydra multirun as a chain in the job's output directory."""

    def __init__(self, **config: Any) -> None:
        super().__init__()
        # kept as given and checked in launch, where a bad value is one line (here Hydra would wrap it)
        self.given = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k, v in config.items()}
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Run the jobs as chains; their returns once the chains ended (``wait``), else none."""
        try:
            return self._launch(job_overrides, initial_job_idx)
        except ChainError as exc:
            raise LauncherError(f"hydra/launcher=chain: {exc}") from None
        except KeyboardInterrupt:  # while waiting: the chains are the cluster's, they go on
            at = self.config.hydra.sweep.dir if self.config is not None else "DIR"
            raise LauncherError(f"hydra/launcher=chain: interrupted; the chains go on (chain sweep status --dir {at})")

    def _launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
        from chain.api.sweep_handle import Sweep  # chain's heavy parts only when a multirun launches
        from chain.sweep.store import SweepDir

        assert self.config is not None and self.hydra_context is not None, "setup() first"
        options = launcher_options(self.given)
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).resolve()
        configs = [self._job_config(overrides, n) for n, overrides in enumerate(job_overrides, initial_job_idx)]
        jobs = [self._job(config, sweep_dir) for config in configs]
        settings = chain_settings(options.settings, os.environ, app_template(self._app_call()))
        store = SweepDir(sweep_dir)
        store.make()
        with store.locked():
            plan = merged(store.read() if store.exists() else None, settings, jobs, time.time())
            store.write(plan.record)
        log.info(f"Launching {len(jobs)} jobs as chains in {sweep_dir}")
        for job in jobs:
            log.info(f"\t#{job.num} : {' '.join(filter_overrides(job.overrides))} -> {job.subdir}")
        sweep = Sweep.open(sweep_dir)
        for line in sweep.resume(max_iter=plan.raise_to, on_message=log.debug):
            log.info(f"\t{line}")
        if not options.wait:
            log.info(f"Submitted; follow them with: chain sweep status --dir {sweep_dir}")
            return []
        log.info(f"Waiting for the chains (chain sweep status --dir {sweep_dir} shows them)")
        sweep.wait(poll=options.poll)
        rows = {row.name: row for row in sweep.status().rows}
        returns = []
        for job, config in zip(jobs, configs):
            row = rows[job.subdir]
            value = read_return_value(sweep_dir / job.subdir) if row.state.done else None  # its completing run's
            log.info(f"\t#{job.num} : {_ended(row, value)}")
            returns.append(self._job_return(job, config, row, value, sweep_dir))
        return returns

    def _job_config(self, overrides: Sequence[str], num: int) -> DictConfig:
        """The job's config as Hydra composes it for a multirun job (its number set)."""
        assert self.config is not None and self.hydra_context is not None
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config):
            config.hydra.job.id = num
            config.hydra.job.num = num
        return config

    def _job(self, config: DictConfig, sweep_dir: Path) -> HydraJob:
        """The job: its number, overrides and directory (one level under the sweep's)."""
        job_sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        if job_sweep_dir != sweep_dir:
            num = config.hydra.job.num
            raise ChainError(f"job #{num} has its own hydra.sweep.dir ({job_sweep_dir}): not supported")
        overrides = tuple(str(o) for o in config.hydra.overrides.task)
        num = int(config.hydra.job.num)
        subdir = check_dir_name(str(config.hydra.sweep.subdir), f"job #{num}'s hydra.sweep.subdir")
        return HydraJob(num, overrides, subdir)

    def _app_call(self) -> AppCall:
        """How this multirun's app is started again for each job."""
        assert self.config is not None
        hydra = self.config.hydra
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        target, path = main_target(sys.argv[0], spec.name if spec else None, os.getcwd())
        sources = [(str(s.provider), str(s.schema), str(s.path)) for s in hydra.runtime.config_sources]
        hydra_overrides = kept_hydra_overrides(str(o) for o in hydra.overrides.hydra)
        name = hydra.job.config_name
        return AppCall(sys.executable, target, config_args(name and str(name), sources), hydra_overrides, path)

    def _job_return(self, job: HydraJob, config: DictConfig, row: PointRow, value: Any, sweep_dir: Path) -> JobReturn:
        """The job's ``JobReturn`` from its point's row in the sweep's status
        and the value its completing run returned."""
        task_cfg = copy.deepcopy(config)
        with read_write(task_cfg), open_dict(task_cfg):
            del task_cfg["hydra"]
        ret = JobReturn(
            overrides=list(job.overrides),
            cfg=task_cfg,
            hydra_cfg=OmegaConf.create({"hydra": copy.deepcopy(config.hydra)}),
            working_dir=str(sweep_dir / job.subdir),
            task_name=str(config.hydra.job.name),
        )
        if row.state.done:
            ret.status = JobStatus.COMPLETED
            ret.return_value = value
        else:
            ret.status = JobStatus.FAILED
            ret.return_value = JobNotCompleted(
                f"job #{job.num} in {sweep_dir / job.subdir}: {_ended(row, None)} "
                f"(chain sweep resume --dir {sweep_dir} continues it)"
            )
        return ret


def _ended(row: PointRow, value: Any) -> str:
    """How a job's chain ended: completed (and what it returned), or its state and reason."""
    if row.state.done:
        return "completed" if value is None else f"completed, returned {value!r:.200}"
    return f"its chain is {row.state.value}" + (f": {row.reason}" if row.reason else "")
