"""Settings: what a chain needs, validated, and the kinds its fields take.

The record (``Settings``) and its enums only. Its one table of fields
(names, environment variables, converters, help) is ``chain.core.fields``;
merging the layers (flag > environment > file > default) and the
cross-field checks are ``chain.core.resolution``; the config file is read
by the commands (``chain.api.config``). Every seed setting keeps the seed's
environment variable name (``MAX_ITER=600 chain submit`` works as
``MAX_ITER=600 sbatch checkpoint_submitter.sh`` did); the others are
``CHAIN_<NAME>``. The TOML file uses the field names (``max_iter = 600``).
"""

from __future__ import annotations

import dataclasses
import enum
import shlex
import signal
from dataclasses import dataclass
from typing import Any

from chain.core.counterspec import CounterKind, CounterSpec, parse_counter_spec
from chain.core.timefmt import parse_slurm_time
from chain.errors import ConfigError
from chain.primitives.signals import signal_named


class LaunchMode(str, enum.Enum):
    DIRECT = "direct"
    SRUN = "srun"


class Launcher(str, enum.Enum):
    """What starts the app's processes on each node: the app command itself
    (none), or a distributed launcher chain composes from the allocation and
    runs once per node under srun (``chain.launch``)."""

    NONE = "none"
    TORCHRUN = "torchrun"
    ACCELERATE = "accelerate"


class Mode(str, enum.Enum):
    """Who drives the chain: a submitter job for the chain's whole life (the
    seed's design), or the runners themselves, each queueing its successor."""

    SUBMITTER = "submitter"
    RELAY = "relay"


class BackendName(str, enum.Enum):
    AUTO = "auto"
    SLURM = "slurm"
    LOCAL = "local"
    PYSLURM = "pyslurm"


@dataclass(frozen=True)
class Settings:
    """Everything a chain needs, validated. Times are kept as the user wrote
    them (Slurm syntax) and exposed in seconds by properties."""

    app_cmd: str = ""
    max_iter: int = 500
    ckpt_path: str = "state_iter.txt"
    counter_cmd: str = ""  # "": the counter is CKPT_PATH's (chain.core.counterspec)
    progress_pattern: str = ""
    checkpoint_every: int = 20
    runner_time: str = "00:03:00"
    runner_margin: int = 60
    submitter_time: str = "3:30"
    submitter_margin: int = 60
    launch_mode: LaunchMode = LaunchMode.DIRECT
    launcher: Launcher = Launcher.NONE
    nproc_per_node: int = 0  # the launcher's processes per node; 0: the task's GPUs, else 1
    verify_cmd: str = ""  # "": a checkpoint is complete by its marker or its format's files
    keep_checkpoints: int = 2
    mode: Mode = Mode.SUBMITTER
    srun_args: str = "-n 1"
    modules: str = ""
    stop_signal: str = "TERM"
    partition: str = ""
    qos: str = ""
    account: str = ""
    runner_mem: str = "512M"
    submitter_mem: str = "256M"
    cpus_per_task: int = 1
    ntasks: int = 1
    job_name: str = "chain"
    runner_sbatch_args: str = ""
    submitter_sbatch_args: str = ""
    retries: int = 0
    adaptive_margin: bool = True
    lookahead: bool = False
    step_aside_after: int = 10
    stall_timeout: int = 0
    exclude_after: int = 2
    hooks: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    mail_user: str = ""
    poll_max: int = 330
    backend: BackendName = BackendName.AUTO
    template_dir: str = ""
    venv_on_path: bool = True
    # resources of the runner (Slurm's own syntax; empty / 0: Slurm's default)
    gpus: str = ""
    gpus_per_task: str = ""
    nodes: int = 0
    ntasks_per_node: int = 0
    constraint: str = ""
    time_min: str = ""
    exclusive: bool = False

    @property
    def runner_seconds(self) -> int:
        return parse_slurm_time(self.runner_time, what="runner time")

    @property
    def submitter_seconds(self) -> int:
        return parse_slurm_time(self.submitter_time, what="submitter time")

    @property
    def counter_spec(self) -> CounterSpec:
        """Where the chain reads its counter (validated when the settings were made)."""
        return parse_counter_spec(self.counter_cmd)

    @property
    def verifies(self) -> bool:
        """Whether a runner checks the checkpoints before its app
        (``jobs.verify``): a ``--verify-cmd``, or ``glob:`` checkpoints."""
        return bool(self.verify_cmd) or self.counter_spec.kind is CounterKind.GLOB

    def stop_margin(self, learned: int) -> int:
        """The margin a runner stops its app with: the one ``learned`` by the
        chain (``ChainStatus.margin``), if larger and the margin adapts."""
        return max(self.runner_margin, learned) if self.adaptive_margin else self.runner_margin

    @property
    def module_list(self) -> list[str]:
        return self.modules.replace(",", " ").split()

    @property
    def stop_signum(self) -> signal.Signals:
        """The stop signal itself (its converter checked the name)."""
        sig = signal_named(self.stop_signal)
        if sig is None:
            raise ConfigError(f"stop signal {self.stop_signal!r} is not a signal name")
        return sig

    @property
    def srun_argv(self) -> list[str]:
        """srun's arguments: the user's, or, when they are the default and a
        task layout is set, the layout (srun mode passes it on)."""
        layout = [
            f"--{flag}={value}"
            for flag, value in (
                ("nodes", self.nodes),
                ("ntasks-per-node", self.ntasks_per_node),
                ("gpus-per-task", self.gpus_per_task),
            )
            if value
        ]
        if layout and self.srun_args == Settings.srun_args:
            return layout
        return shlex.split(self.srun_args)

    @property
    def time_min_seconds(self) -> int | None:
        return parse_slurm_time(self.time_min, what="minimum time") if self.time_min else None

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["launch_mode"] = self.launch_mode.value
        out["launcher"] = self.launcher.value
        out["mode"] = self.mode.value
        out["backend"] = self.backend.value
        out["hooks"] = list(self.hooks)
        out["notify"] = list(self.notify)
        return out
