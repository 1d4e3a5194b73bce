"""Settings: one table of fields, resolved as flag > environment > file > default.

Pure except for reading the TOML file. Every seed setting keeps the seed's
environment variable name (``MAX_ITER=600 chain submit`` works as
``MAX_ITER=600 sbatch checkpoint_submitter.sh`` did); the others are
``CHAIN_<NAME>``. The TOML file uses the field names (``max_iter = 600``).
"""

from __future__ import annotations

import dataclasses
import enum
import shlex
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.core import convert as cv
from chain.core.counterspec import CounterSpec, parse_counter_spec
from chain.core.timefmt import parse_slurm_time
from chain.errors import ConfigError
from chain.primitives import bounded, safeio
from chain.primitives.signals import signal_named

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


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


@dataclass(frozen=True)
class FieldSpec:
    """One setting: its TOML key (``name``), environment variable, converter
    and help. The CLI options of ``chain submit`` and ``chain render`` are
    generated from these (``chain.cli.options``)."""

    name: str
    env: str
    convert: Callable[[Any, str], Any]
    help: str
    metavar: str = "TEXT"  # "BOOL": an on/off switch pair; "CMD...": repeatable
    off_flag: str = ""  # a switch's "off" flag when not --no-<name>
    flag: str = ""  # when not --<name with dashes>

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def default(self) -> Any:
        return getattr(Settings(), self.name)


FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("app_cmd", "APP_CMD", cv.app_command, "shell command that runs the app", metavar="CMD"),
    FieldSpec(
        "max_iter",
        "MAX_ITER",
        cv.integer(1),
        "the chain completes when the app's counter reaches this (passed to the app as MAX_ITER)",
        metavar="INT",
    ),
    FieldSpec(
        "ckpt_path",
        "CKPT_PATH",
        cv.path,
        "the progress counter the app writes, a plain integer (passed to the app as CKPT_PATH)",
        metavar="PATH",
    ),
    FieldSpec(
        "counter_cmd",
        "CHAIN_COUNTER_CMD",
        cv.counter_cmd,
        "read the counter from the app's own checkpoint instead of CKPT_PATH: json:PATH:KEY.PATH (a JSON "
        "key path), glob:PATTERN (the largest trailing number of the matching names, e.g. "
        "glob:out/checkpoint-*), torch:PATH:KEY (a key of a torch.save dict, loaded with "
        "weights_only=True), or a shell command printing the integer (exit 100: no checkpoint yet; "
        "at most 120 s)",
        metavar="SPEC",
    ),
    FieldSpec(
        "progress_pattern",
        "CHAIN_PROGRESS_PATTERN",
        cv.progress_pattern,
        "a regular expression whose group captures the iteration in the app's output lines "
        r"(e.g. '^iter (\d+):'): how far a killed app got, for the redone work",
        metavar="REGEX",
    ),
    FieldSpec(
        "checkpoint_every",
        "CHECKPOINT_EVERY",
        cv.integer(1),
        "passed to the app as CHECKPOINT_EVERY, for its own checkpoint interval (chain never checkpoints the app)",
        metavar="INT",
    ),
    FieldSpec("runner_time", "RUNNER_TIME_LIMIT", cv.time, "runner wall time (Slurm --time syntax)", metavar="TIME"),
    FieldSpec(
        "runner_margin",
        "RUNNER_MARGIN_SEC",
        cv.integer(0),
        "seconds before the runner's end to send the app the stop signal (the adaptive margin may raise it)",
        metavar="SECONDS",
    ),
    FieldSpec(
        "submitter_time", "SUBMITTER_TIME_LIMIT", cv.time, "submitter wall time (Slurm --time syntax)", metavar="TIME"
    ),
    FieldSpec(
        "submitter_margin",
        "SUBMITTER_MARGIN_SEC",
        cv.integer(0),
        "seconds before the submitter's end to hand over to a successor submitter",
        metavar="SECONDS",
    ),
    FieldSpec(
        "launch_mode", "LAUNCH_MODE", cv.choice(LaunchMode), "run the app directly or via srun", metavar="direct|srun"
    ),
    FieldSpec(
        "launcher",
        "CHAIN_LAUNCHER",
        cv.choice(Launcher),
        "start the app's processes with torchrun or accelerate launch, once per node under srun, composed "
        "from the allocation (nodes, node rank, rendezvous); APP_CMD is then the script and its arguments",
        metavar="none|torchrun|accelerate",
    ),
    FieldSpec(
        "nproc_per_node",
        "CHAIN_NPROC_PER_NODE",
        cv.integer(0),
        "the launcher's processes per node (0: the task's GPUs, else 1)",
        metavar="INT",
    ),
    FieldSpec(
        "verify_cmd",
        "CHAIN_VERIFY_CMD",
        cv.text,
        "shell command that says whether a checkpoint is complete: run with the checkpoint's path as $1 "
        "(and CHAIN_CHECKPOINT), exit 0 for complete; a newest checkpoint that fails is set aside at resume",
        metavar="CMD",
    ),
    FieldSpec(
        "keep_checkpoints",
        "CHAIN_KEEP_CHECKPOINTS",
        cv.integer(1),
        "how many of the newest checkpoints the app adapters keep (passed to the app as CHAIN_KEEP_CHECKPOINTS)",
        metavar="INT",
    ),
    FieldSpec(
        "mode",
        "CHAIN_MODE",
        cv.choice(Mode),
        "submitter: a driver job for the chain's life (the seed's); relay: each runner queues its "
        "successor, no job holds an allocation between runners",
        metavar="submitter|relay",
    ),
    FieldSpec("srun_args", "SRUN_ARGS", cv.shell_words, "arguments to srun in srun mode", metavar="ARGS"),
    FieldSpec(
        "modules", "MODULE_LIST", cv.text, "modules loaded before the app (space or comma separated)", metavar="MODULES"
    ),
    FieldSpec(
        "stop_signal",
        "CHAIN_STOP_SIGNAL",
        cv.signal_name,
        "signal sent to the app before the wall time (R needs INT)",
        metavar="SIGNAL",
    ),
    FieldSpec("partition", "CHAIN_PARTITION", cv.text, "Slurm partition of the chain's jobs", metavar="NAME"),
    FieldSpec("qos", "CHAIN_QOS", cv.text, "Slurm QOS of the chain's jobs", metavar="NAME"),
    FieldSpec("account", "CHAIN_ACCOUNT", cv.text, "Slurm account of the chain's jobs", metavar="NAME"),
    FieldSpec(
        "runner_mem",
        "CHAIN_RUNNER_MEM",
        cv.memory,
        "runner --mem: a whole number with an optional unit K, M (the default), G or T; 0: all of the node's memory",
        metavar="MEM",
    ),
    FieldSpec(
        "submitter_mem",
        "CHAIN_SUBMITTER_MEM",
        cv.memory,
        "submitter --mem (the end-of-chain mail job's too), in --runner-mem's form",
        metavar="MEM",
    ),
    FieldSpec("cpus_per_task", "CHAIN_CPUS_PER_TASK", cv.integer(1), "runner --cpus-per-task", metavar="INT"),
    FieldSpec("ntasks", "CHAIN_NTASKS", cv.integer(1), "runner --ntasks", metavar="INT"),
    FieldSpec("job_name", "CHAIN_JOB_NAME", cv.job_name, "prefix of the jobs' names", metavar="NAME"),
    FieldSpec(
        "runner_sbatch_args",
        "CHAIN_RUNNER_SBATCH_ARGS",
        cv.shell_words,
        "extra sbatch arguments of the runner",
        metavar="ARGS",
    ),
    FieldSpec(
        "submitter_sbatch_args",
        "CHAIN_SUBMITTER_SBATCH_ARGS",
        cv.shell_words,
        "extra sbatch arguments of the submitter",
        metavar="ARGS",
    ),
    FieldSpec(
        "retries", "CHAIN_RETRIES", cv.integer(0), "runner failures retried before the chain fails", metavar="INT"
    ),
    FieldSpec(
        "adaptive_margin",
        "CHAIN_ADAPTIVE_MARGIN",
        cv.boolean,
        "raise the runner margin to 2x the app's worst measured stop time + 5 s (at most half the runner time)",
        metavar="BOOL",
        off_flag="--fixed-margin",
    ),
    FieldSpec(
        "lookahead",
        "CHAIN_LOOKAHEAD",
        cv.boolean,
        "pre-queue the next runner behind the running one (its queue wait overlaps the compute)",
        metavar="BOOL",
    ),
    FieldSpec(
        "step_aside_after",
        "CHAIN_STEP_ASIDE_AFTER_SEC",
        cv.integer(0),
        "submitter mode: when its runner has waited this long for resources, the submitter hands over to "
        "a successor that starts with the runner, so it never holds a slot its runner waits for "
        "(0: it waits)",
        metavar="SECONDS",
    ),
    FieldSpec(
        "stall_timeout",
        "CHAIN_STALL_TIMEOUT",
        cv.integer(0),
        "stop the app (stop signal, then kill) when its counter, output, iteration log and heartbeat file "
        "($CHAIN_HEARTBEAT) have all stayed unchanged this long: a stall, counted as a runner without "
        "progress (0: never)",
        metavar="SECONDS",
    ),
    FieldSpec(
        "exclude_after",
        "CHAIN_EXCLUDE_AFTER",
        cv.integer(0),
        "leave a node out of the chain's later runners once this many runners stalled or lost the node "
        "there (0: never)",
        metavar="INT",
    ),
    FieldSpec(
        "hooks", "CHAIN_HOOKS", cv.commands, "commands run when the chain completes", metavar="CMD...", flag="--hook"
    ),
    FieldSpec(
        "notify",
        "CHAIN_NOTIFY",
        cv.commands,
        "commands run once when the chain ends (completed, failed, stopped, cancelled), with CHAIN_ID, "
        "CHAIN_STATE, CHAIN_REASON, CHAIN_DIR, CHAIN_ITERATION and MAX_ITER set",
        metavar="CMD...",
        flag="--notify",
    ),
    FieldSpec(
        "mail_user",
        "CHAIN_MAIL_USER",
        cv.mail_user,
        "mail this address through Slurm when the chain ends (one mail, never one per handoff)",
        metavar="ADDR",
    ),
    FieldSpec(
        "poll_max",
        "CHAIN_POLL_MAX_SEC",
        cv.integer(5),
        "longest wait between two queries of the scheduler",
        metavar="SECONDS",
    ),
    FieldSpec(
        "backend",
        "CHAIN_BACKEND",
        cv.choice(BackendName),
        "where jobs run: Slurm's clients, pyslurm, the embedded local "
        "backend, or auto: Slurm when its controller answers, local only where Slurm is not installed "
        "(says which)",
        metavar="auto|slurm|local|pyslurm",
    ),
    FieldSpec(
        "template_dir",
        "CHAIN_TEMPLATE_DIR",
        cv.text,
        "directory of user templates overriding the built-in ones",
        metavar="DIR",
    ),
    FieldSpec("gpus", "CHAIN_GPUS", cv.gres_count, "runner --gpus (count or type:count)", metavar="[TYPE:]N"),
    FieldSpec("gpus_per_task", "CHAIN_GPUS_PER_TASK", cv.gres_count, "runner --gpus-per-task", metavar="[TYPE:]N"),
    FieldSpec("nodes", "CHAIN_NODES", cv.integer(0), "runner --nodes (0: Slurm's default)", metavar="INT"),
    FieldSpec(
        "ntasks_per_node",
        "CHAIN_NTASKS_PER_NODE",
        cv.integer(0),
        "runner --ntasks-per-node (0: not set)",
        metavar="INT",
    ),
    FieldSpec("constraint", "CHAIN_CONSTRAINT", cv.text, "runner --constraint (node features)", metavar="FEATURES"),
    FieldSpec(
        "time_min",
        "CHAIN_TIME_MIN",
        cv.optional_time,
        "runner --time-min: Slurm may start it earlier with a shorter limit (the runner reads its real end)",
        metavar="TIME",
    ),
    FieldSpec("exclusive", "CHAIN_EXCLUSIVE", cv.boolean, "runner --exclusive (whole nodes)", metavar="BOOL"),
    FieldSpec(
        "venv_on_path",
        "CHAIN_VENV_ON_PATH",
        cv.boolean,
        "put the bin directory of the virtualenv running chain first on the app's PATH, as activate does",
        metavar="BOOL",
    ),
)
FIELD_BY_NAME = {spec.name: spec for spec in FIELDS}
CONFIG_FILE_NAME = "chain.toml"


CONFIG_CAP = 1 << 20  # bytes of a config file read at most (chain.toml is a few hundred)


def read_user_text(path: Path, cap: int, label: str) -> str:
    """The UTF-8 text of a file the user named (``label``: what it is, for
    the message), at most ``cap`` bytes; a FIFO or a device is refused, never
    waited on; every failure is a one-line ConfigError."""
    try:
        return safeio.read_file(path, cap).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{label} {path} does not exist") from None
    except safeio.UnsafeFileError as exc:
        raise ConfigError(f"{label} {exc.where} {exc.problem}: name a regular file") from None
    except OSError as exc:
        raise ConfigError(f"{label} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{label} {path} is not UTF-8 text") from None


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML config; unknown keys and unreadable files are ConfigErrors.
    A FIFO or a device is refused, never waited on; a value too deep or an
    integer too long for Python is a bad file, in one line."""
    text = read_user_text(path, CONFIG_CAP, "config file")
    try:
        data: dict[str, Any] = tomllib.loads(text)
        bounded.check_depth(data)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: nested more than {bounded.MAX_DEPTH} deep") from None
    except ValueError as exc:  # bounded's, or an integer past Python's 4300 digits
        raise ConfigError(f"config file {path}: {_toml_bound(exc)}") from None
    if "chain" in data and isinstance(data["chain"], dict) and len(data) == 1:
        data = data["chain"]  # allow a [chain] table
    unknown = sorted(set(data) - set(FIELD_BY_NAME))
    if unknown:
        raise ConfigError(f"config file {path}: unknown key {unknown[0]!r}")
    return data


def _toml_bound(exc: ValueError) -> str:
    """What a ``ValueError`` of the TOML reader says in chain's words."""
    if "integer string conversion" in str(exc):  # Python's own limit, worded for a programmer
        return f"an integer too long to read (chain reads at most {bounded.MAX_DIGITS} digits)"
    return str(exc)


def resolve(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    file_values: Mapping[str, Any],
    base: Settings | None = None,
    *,
    file_label: str = "config file",
) -> Settings:
    """Merge the layers (flag > environment > file > base) and validate.

    ``base`` is the defaults, or a stored chain's settings on ``--resume``.
    """
    values: dict[str, Any] = {}
    start = base or Settings()
    for spec in FIELDS:
        if flags.get(spec.name) is not None:
            values[spec.name] = spec.convert(flags[spec.name], f"--{spec.name.replace('_', '-')}")
        elif spec.env in environ:
            values[spec.name] = spec.convert(environ[spec.env], spec.env)
        elif spec.name in file_values:
            values[spec.name] = spec.convert(file_values[spec.name], f"{file_label}: {spec.name}")
        else:
            values[spec.name] = getattr(start, spec.name)
    if values["launcher"] is not Launcher.NONE and not values["ntasks_per_node"]:
        values["ntasks_per_node"] = 1  # one launcher a node: its processes are --nproc-per-node
    settings = Settings(**values)
    validate(settings)
    return settings


def unapplied(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    file_values: Mapping[str, Any],
    stored: Settings,
    *,
    file_label: str = "config file",
) -> list[str]:
    """On resume a chain keeps its stored settings and only flags change
    them: one line for each environment variable or file key that differs
    from the stored value and is therefore not applied."""
    lines: list[str] = []
    for spec in FIELDS:
        if flags.get(spec.name) is not None:
            continue
        stored_value = getattr(stored, spec.name)
        for where, raw in (
            (spec.env, environ.get(spec.env)),
            (f"{file_label}: {spec.name}", file_values.get(spec.name)),
        ):
            if raw is None:
                continue
            try:
                value = spec.convert(raw, where)
            except ConfigError as exc:
                lines.append(f"not applied on resume: {exc}")
                continue
            if value != stored_value:
                shown = getattr(stored_value, "value", stored_value)
                lines.append(
                    f"not applied on resume: {where} = {raw!r} differs from the chain's stored "
                    f"{shown!r} (use {spec.option} to change it)"
                )
    return lines


def validate(settings: Settings) -> None:
    """Cross-field checks (one-line ConfigError on the first problem)."""
    if not settings.app_cmd.strip():
        raise ConfigError("no app command: set --app-cmd, APP_CMD or app_cmd in chain.toml")
    runner = settings.runner_seconds
    if settings.runner_margin >= runner:
        raise ConfigError(f"runner margin {settings.runner_margin}s must be smaller than the runner time {runner}s")
    time_min = settings.time_min_seconds
    if time_min is not None and not settings.runner_margin < time_min <= runner:
        raise ConfigError(
            f"runner minimum time {time_min}s must be above the runner margin "
            f"{settings.runner_margin}s and at most the runner time {runner}s"
        )
    submitter = settings.submitter_seconds
    if settings.submitter_margin >= submitter:
        raise ConfigError(
            f"submitter margin {settings.submitter_margin}s must be smaller than the submitter time {submitter}s"
        )
    from chain.core.launch import strategy  # the launch strategies read Settings: imported here, not above

    problem = strategy(settings).problem(settings)
    if problem:
        raise ConfigError(problem)


def from_json(data: Mapping[str, Any]) -> Settings:
    """Settings stored in a chain directory (validated again, never trusted)."""
    if not isinstance(data, Mapping):
        raise ConfigError("stored settings are not a JSON object")
    unknown = sorted(set(data) - set(FIELD_BY_NAME))
    if unknown:
        raise ConfigError(f"stored settings: unknown key {unknown[0]!r}")
    values = {k: FIELD_BY_NAME[k].convert(v, f"stored {k}") for k, v in data.items()}
    settings = dataclasses.replace(Settings(), **values)
    validate(settings)
    return settings
