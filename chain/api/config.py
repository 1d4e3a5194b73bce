"""Settings for a command: the chain directory, the settings layers (the
config file read here: the core that merges them reads no file), the app
check."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chain.backends.base import Backend
from chain.core.fields import FIELD_BY_NAME, FIELDS
from chain.core.launch import launched_script
from chain.core.limits import JobLimits, room
from chain.core.resolution import resolve, unapplied
from chain.core.settings import Launcher, Settings
from chain.errors import CheckpointError, ConfigError
from chain.modes import driver, least_needs
from chain.primitives import bounded, safeio
from chain.store import ChainDir, view
from chain.store.counter import read_chain_counter

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CHAIN_DIR_NAME = ".chain"  # the chain directory in a working directory, by default

COUNTER_RULE = (
    "a counter holds one plain integer, the iterations done (e.g. 10), or is absent "
    "for a fresh start: repair or remove it, then submit again"
)
CONFIG_FILE_NAME = "chain.toml"  # read from the working directory when no --config names one
CONFIG_CAP = 1 << 20  # bytes of a config file read at most (chain.toml is a few hundred)


def chain_dir_path(value: str | os.PathLike[str] | None, cwd: Path) -> Path:
    """``--chain-dir`` (else ``$CHAIN_DIR``, else ``.chain``) as an absolute
    path; a working directory holding a chain in ``.chain`` is that chain."""
    raw = str(value) if value else os.environ.get("CHAIN_DIR", CHAIN_DIR_NAME)
    if not raw.strip() or "\n" in raw or "\0" in raw:
        raise ConfigError(f"--chain-dir {raw!r} is not a usable path")
    path = Path(raw).expanduser()
    return resolve_chain_dir((path if path.is_absolute() else cwd / path).resolve())


def resolve_chain_dir(path: Path) -> Path:
    """``path``, or its ``.chain`` when that holds a chain: a working
    directory names its chain, even when the app keeps a ``state.json``
    of its own beside it (a common checkpoint name)."""
    inner = path / CHAIN_DIR_NAME
    return inner if (inner / "state.json").is_file() else path


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


def load_settings(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    config: Path | None,
    cwd: Path,
    stored: Settings | None = None,
    notify: Callable[[str], None] | None = None,
) -> Settings:
    """Resolve settings: flag > environment > file > default.

    For an existing chain (``stored``: its settings) only flags change the
    stored values; each environment variable or file key that differs is
    reported through ``notify`` and not applied (README: resume rule).
    """
    file_values: dict[str, Any] = {}
    label = "config file"
    if config is not None:
        file_values = read_config_file(config)
        label = str(config)
    elif (cwd / CONFIG_FILE_NAME).is_file():
        path = cwd / CONFIG_FILE_NAME
        file_values = read_config_file(path)
        label = str(path)
    if stored is None:
        return resolve(flags, environ, file_values, file_label=label)
    for line in unapplied(flags, environ, file_values, stored, file_label=label):
        if notify:
            notify(line)
    return resolve(flags, {}, {}, stored)


def check_command_line(flags: Mapping[str, Any], config: Path | None) -> None:
    """Each flag's value, and the config file if one is named, valid on their
    own: for a command refused whatever its settings (resuming nothing),
    whose command line's own errors still come first."""
    for spec in FIELDS:
        if flags.get(spec.name) is not None:
            spec.convert(flags[spec.name], spec.option)
    if config is not None:
        read_config_file(config)


def check_app(settings: Settings, workdir: Path) -> int:
    """The app's program must exist (unless modules will provide it), and
    its counter file, if there, must be a file holding a plain integer
    (refused here, before anything is queued: a job would only stop on it);
    with ``--counter-cmd``, the app's checkpoint must be readable by it.
    Returns the counter (0 without a checkpoint)."""
    ckpt = workdir / settings.ckpt_path
    if settings.counter_cmd:  # read from the app's own checkpoint: its reader's error says it all
        counter = read_chain_counter(settings, workdir)
    else:
        if ckpt.exists() and not ckpt.is_file():
            raise ConfigError(f"checkpoint counter {ckpt} is not a regular file")
        try:
            counter = read_chain_counter(settings, workdir)
        except CheckpointError as exc:
            raise CheckpointError(f"{exc}; {COUNTER_RULE}") from None
    _check_program(settings, workdir)
    return counter


def _check_program(settings: Settings, workdir: Path) -> None:
    """The app command's program exists and can run (or modules will provide it);
    under ``--launcher``, its script is a file."""
    if settings.launcher is not Launcher.NONE:
        script = launched_script(settings)
        if script is not None and not (workdir / script).is_file():
            raise ConfigError(f"--launcher {settings.launcher.value}: script {script!r} is not a file in {workdir}")
        return
    try:
        words = shlex.split(settings.app_cmd)
    except ValueError as exc:
        raise ConfigError(f"--app-cmd {settings.app_cmd!r}: {exc}") from None
    if not words:
        raise ConfigError("no app command: set --app-cmd, APP_CMD or app_cmd in chain.toml")
    program = words[0]
    if "=" in program and not program.startswith(("/", ".")):
        return  # VAR=value cmd ...: leave it to the shell
    if "/" in program:
        _check_path(program, workdir)
    elif not settings.module_list and not shutil.which(program):
        _check_shell_word(program)


def _check_path(program: str, workdir: Path) -> None:
    """A program named by its path exists and is executable."""
    path = Path(program) if Path(program).is_absolute() else workdir / program
    if not path.exists():
        raise ConfigError(f"app {program!r} does not exist")
    if not os.access(path, os.X_OK):
        raise ConfigError(f"app {program!r} is not executable")


def _check_shell_word(program: str) -> None:
    """A program on no PATH may still be a shell builtin or keyword (``exec``, ``time``): an app command too."""
    try:
        kind = subprocess.run(
            ["bash", "-c", 'type -t -- "$1"', "_", program], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:  # no bash here: the runner runs the app with bash -c, so it could not run either
        raise ConfigError(
            f"app command {program!r} not found on PATH, and bash, which runs it, is not on PATH either"
        ) from None
    if kind not in ("builtin", "keyword", "function"):
        raise ConfigError(f"app command {program!r} not found on PATH")


class LimitsMemo:
    """The site's job limits asked once for a batch of submissions: a
    sweep's chains share their account, QOS and partition, and asking
    accounting (two ``sacctmgr``, ~0.5 s) for each of 200 chains was most
    of ``submit_many``'s time. Only for one batch: a limit changed by the
    site is seen by the next batch. Thread-safe: the first caller asks while
    the others for the same key wait for its answer."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, str, str, str], JobLimits | None] = {}
        self._lock = threading.Lock()

    def limits(self, settings: Settings, backend: Backend) -> JobLimits | None:
        """The limits for ``settings``' account, QOS and partition on ``backend``'s cluster."""
        key = (backend.name, backend.query_scope(), settings.account, settings.qos, settings.partition)
        with self._lock:
            if key not in self._known:
                self._known[key] = backend.job_limits(
                    account=settings.account, qos=settings.qos, partition=settings.partition
                )
            return self._known[key]


def check_room(
    settings: Settings,
    backend: Backend,
    notify: Callable[[str], None] | None,
    memo: LimitsMemo | None = None,
) -> None:
    """Refuse a chain the site's per-user job limits leave no room for
    (``chain.core.limits``), naming relay mode where it fits; say so when
    they only slow it down. ``memo``: the limits asked once for a batch."""
    limits = (memo or LimitsMemo()).limits(settings, backend)
    verdict = room(
        driver(settings.mode).needs(settings.lookahead),
        least_needs(),
        step_aside_after=settings.step_aside_after,
        limits=limits,
    )
    if verdict.refusal:
        raise ConfigError(verdict.refusal)
    if verdict.warning and notify:
        notify(verdict.warning)


def stored_settings(chain: ChainDir) -> Settings:
    """The chain's stored settings, validated again (``chain.store.view``): a
    missing or damaged ``settings.json`` is a one-line ``ChainDirError``."""
    return view.stored_settings(chain)
