"""What each chain runs: the user's Hydra app again, in single-run mode, for
its job's overrides, with its output directory the job's. Pure.

A sweep's points share one app command (``chain.sweep``): here it starts
``python -m hydra_plugins.hydra_chain_launcher.job {job_num} {overrides} --
python train.py --config-name=... <hydra overrides>``, and the job program
(``job``) appends, in the job's directory, the job's overrides (the
parameter's text, split as the shell would), ``hydra.run.dir`` (that
directory), ``hydra.job.num``, ``hydra.mode=RUN`` and the callback that
carries a completed run's return value back (``_callback``), then runs it
in its own place (``exec``: the stop signal reaches the app itself). The job's
number and overrides are its chain's parameters: ``params.json``,
``CHAIN_PARAM_JOB_NUM`` and ``CHAIN_PARAM_OVERRIDES``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from chain.errors import ConfigError
from chain.sweep.command import placeholders
from chain.sweep.params import Point, check_value

JOB_MODULE = "hydra_plugins.hydra_chain_launcher.job"
CALLBACK = "hydra_plugins.hydra_chain_launcher._callback.SaveReturnValue"
CALLBACK_KEY = "chain_return"
NUM_PARAM = "job_num"
OVERRIDES_PARAM = "overrides"
SEPARATOR = "--"
PATH_OPTION = "--pythonpath"
# hydra overrides of the multirun a job does not take: the launcher's, the sweeper's and
# the sweep directory's (a job is one run, in its own directory: a re-run that spells the
# sweep directory another way is the same sweep), the mode and what the job program sets
DROPPED_HYDRA_KEYS = ("hydra.launcher", "hydra.sweeper", "hydra.sweep", "hydra.mode", "hydra.run.dir", "hydra.job.num")
# the characters Hydra's override grammar escapes in an unquoted value
_HYDRA_SPECIAL = re.compile(r"([\\()\[\]{}:=, \t])")


@dataclass(frozen=True)
class AppCall:
    """How the user's app was started: the Python, the script (or ``-m
    module``), the config options, the hydra overrides a job keeps, and the
    directory a module is imported from (``-m`` only: "")."""

    python: str
    target: tuple[str, ...]
    config_args: tuple[str, ...] = ()
    hydra_overrides: tuple[str, ...] = ()
    pythonpath: str = ""


def job_point(num: int, overrides: Sequence[str]) -> Point:
    """A job's parameters: its number and its overrides, as one shell-quoted line."""
    return Point.of({NUM_PARAM: num, OVERRIDES_PARAM: check_value(shlex.join(overrides), f"job {num}'s overrides")})


def app_template(call: AppCall) -> str:
    """The sweep's ``app_cmd``: the job program with the job's parameters as
    placeholders, then the user's app command line."""
    job = [call.python, "-m", JOB_MODULE]
    path = [PATH_OPTION, call.pythonpath] if call.pythonpath else []
    app = [call.python, *call.target, *call.config_args, *call.hydra_overrides]
    for word in app:
        if placeholders(word):  # the sweep would read a literal {name} as its placeholder
            raise ConfigError(f"the app's command line holds {{name}} in {word!r:.60}: not supported by the launcher")
    return f"{shlex.join(job)} {{{NUM_PARAM}}} {{{OVERRIDES_PARAM}}} {shlex.join([*path, SEPARATOR, *app])}"


def job_argv(app: Sequence[str], num: int, overrides_text: str, run_dir: str) -> list[str]:
    """The app's command line for one job: ``app`` with the job's overrides,
    its run directory, its number, the single-run mode and the return
    value's callback appended."""
    return [
        *app,
        *shlex.split(overrides_text),
        f"hydra.run.dir={hydra_value(run_dir)}",
        f"hydra.job.num={num}",
        "hydra.mode=RUN",
        f"++hydra.callbacks.{CALLBACK_KEY}._target_={CALLBACK}",
    ]


def hydra_value(text: str) -> str:
    """``text`` as an unquoted value of a Hydra override (its special
    characters escaped); a ``$`` (an interpolation) is refused."""
    if "$" in text:
        raise ConfigError(f"{text!r:.80} holds a '$', which Hydra would read as an interpolation")
    return _HYDRA_SPECIAL.sub(r"\\\1", text)


def override_key(override: str) -> str:
    """An override's key, dotted: ``+hydra/launcher=chain`` -> ``hydra.launcher``."""
    key = override.lstrip("~+").split("=", 1)[0]
    return key.split("@", 1)[0].replace("/", ".").strip()


def kept_hydra_overrides(overrides: Iterable[str]) -> tuple[str, ...]:
    """The multirun's hydra overrides a job keeps (its logging, its name, ...)."""
    return tuple(
        o
        for o in overrides
        if not any(override_key(o) == k or override_key(o).startswith(k + ".") for k in DROPPED_HYDRA_KEYS)
    )


def config_args(config_name: str | None, sources: Iterable[tuple[str, str, str]]) -> tuple[str, ...]:
    """The options that find the multirun's config again: its name, the
    primary config directory (a file one) and each ``--config-dir``;
    ``sources`` are Hydra's config sources as (provider, schema, path)."""
    args = [f"--config-name={config_name}"] if config_name else []
    for provider, schema, path in sources:
        if schema != "file" or not path:
            continue  # a package's or a structured config is found again by the script itself
        if provider == "main":
            args.append(f"--config-path={path}")
        elif provider == "command-line":
            args.append(f"--config-dir={path}")
    return tuple(args)


def main_target(argv0: str, module: str | None, cwd: str) -> tuple[tuple[str, ...], str]:
    """The script (absolute) or ``-m module`` that started the multirun, and
    the directory a module is imported from ("" for a script: Python puts
    the script's own directory first)."""
    if module:
        return ("-m", module.removesuffix(".__main__")), cwd
    if not argv0 or argv0 == "-c":
        raise ConfigError("hydra/launcher=chain runs your script again per job: start the multirun from a script file")
    return (posixpath.normpath(posixpath.join(cwd, argv0)),), ""
