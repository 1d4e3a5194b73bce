"""The one table of settings: each field's TOML key, environment variable,
converter (``chain.core.convert``) and help. The CLI options of ``chain
submit`` and ``chain render`` are generated from it (``chain.cli.options``),
and so is the docs' Settings page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chain.core import convert as cv
from chain.core.settings import BackendName, Launcher, LaunchMode, Mode, Settings


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
