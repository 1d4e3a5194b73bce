"""The job's return value, carried back to the multirun: a Hydra callback
the job program adds to each run (``++hydra.callbacks.chain_return``).

When the task function returns (it completed: a run that stops to be
continued exits 99 with ``sys.exit``, and Hydra calls no callback then), its
value is written as JSON to ``chain_return.json`` in the job's directory,
where ``ChainLauncher`` reads it into the job's ``JobReturn``. A value JSON
cannot hold is left out with a warning: the job's return value is then None.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

RETURN_FILE = "chain_return.json"
log = logging.getLogger(__name__)


class SaveReturnValue(Callback):
    """Writes a completed job's return value into its directory."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if job_return.status is not JobStatus.COMPLETED:
            return
        try:
            text = json.dumps({"value": job_return.return_value})
        except (TypeError, ValueError) as exc:
            log.warning(f"the job's return value is not carried back to the multirun (not JSON: {exc})")
            return
        path = Path(str(config.hydra.runtime.output_dir)) / RETURN_FILE  # the job's directory
        path.with_suffix(".tmp").write_text(text)
        os.replace(path.with_suffix(".tmp"), path)


def read_return_value(directory: Path) -> Any:
    """The value a job's completed run returned (None when it wrote none)."""
    try:
        return json.loads((directory / RETURN_FILE).read_text())["value"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
