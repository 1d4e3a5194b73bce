"""Render the submitter and runner sbatch scripts from Jinja templates.

``jinja_env`` is the one place the environment is built: StrictUndefined
(a missing value is an error, not an empty string), the package's templates
with an optional user directory in front, and ``q`` (shell quoting) as the
filter every value goes through.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import jinja2
import jinja2.bccache

from chain.core.launch import SHOWN_SITE, strategy
from chain.core.names import submitter_job_name
from chain.core.settings import Launcher, Settings
from chain.core.timefmt import format_sbatch_time
from chain.errors import ConfigError

RUNNER_TEMPLATE = "runner.sbatch.j2"
SUBMITTER_TEMPLATE = "submitter.sbatch.j2"
MAIL_TEMPLATE = "mail.sbatch.j2"


def builtin_template_dir() -> Path:
    """The shipped templates: ``chain/templates`` in an installed wheel (the
    top-level ``templates/`` is packaged there), ``templates/`` beside the
    package in a source checkout or editable install."""
    package = Path(__file__).resolve().parents[1]  # chain/
    installed = package / "templates"
    if installed.is_dir():
        return installed
    return package.parent / "templates"


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates kept for the process, by template file and its
    source's checksum: each render still gets a fresh environment (the search
    path looked through and every file read anew, so a template added,
    edited or swapped in between two submissions is the one used) but never
    compiles the same source twice (~50 ms a chain in a sweep). A cache, not
    state: what it holds is a function of the sources."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = self._code.get(bucket.key)
        if data is not None:
            bucket.bytecode_from_string(data)  # dropped by Jinja if its checksum is not the source's

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_COMPILED = _CompiledTemplates()


def jinja_env(user_dir: str | Path | None = None) -> jinja2.Environment:
    """The environment for the templates in ``user_dir`` (in front) and the
    shipped ones; a new one each call, its templates compiled once a process."""
    search: list[str] = []
    if user_dir:
        path = Path(user_dir).expanduser()
        if not path.is_dir():
            raise ConfigError(f"template directory {path} does not exist")
        search.append(str(path))
    search.append(str(builtin_template_dir()))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=False,
        finalize=_one_line,
        bytecode_cache=_COMPILED,
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return env


def _one_line(value: object) -> object:
    """Every value rendered stays on its line: a newline in one would put
    whatever follows it on a line of its own in the script."""
    if isinstance(value, str) and ("\n" in value or "\r" in value or "\0" in value):
        raise ConfigError(f"refusing to render a value that spans lines: {value[:60]!r}")
    return value


def output_pattern(logs: Path, stem: str) -> str:
    """sbatch's ``--output`` for a job's log in LOGS, ``STEM-<job id>.out``.
    sbatch reads the whole value as a filename pattern: a ``%`` in the
    directory is doubled (``%j`` there would name another directory, and
    the job fail with no log, exit 0:53); a backslash turns every
    replacement off (Slurm 22.05 then failed the job with no log), so a
    directory holding one is refused."""
    check_job_dir(logs.parent)
    return f"{str(logs).replace('%', '%%')}/{stem}-%j.out"


def check_job_dir(directory: Path) -> None:
    """Refuse a directory under which sbatch cannot name a job's log (one
    line): a backslash in its path turns sbatch's --output patterns off."""
    if "\\" in str(directory):
        raise ConfigError(
            f"the directory {str(directory)!r} holds a backslash, which sbatch's --output cannot carry "
            "(it turns the job id's replacement off): use a directory without one"
        )


@dataclass(frozen=True)
class Scripts:
    submitter: str
    runner: str
    mail: str = ""  # the end-of-chain mail job (--mail-user), "" without it


def render_scripts(
    settings: Settings,
    *,
    chain_id: str,
    chain_dir: Path,
    workdir: Path,
    python: str | None = None,
) -> Scripts:
    """Both scripts exactly as ``chain submit`` submits them."""
    env = jinja_env(settings.template_dir or None)
    logs = chain_dir / "logs"
    common = {
        "s": settings,
        "chain_id": chain_id,
        "chain_dir": str(chain_dir),
        "workdir": str(workdir),
        "python": python or sys.executable,
        "modules": settings.module_list,
        "launch_line": _launch_line(settings, python or sys.executable),
    }
    try:
        runner = env.get_template(RUNNER_TEMPLATE).render(
            **common,
            job_name=f"{chain_id}.runner",
            output=output_pattern(logs, "runner"),
            sbatch_time=format_sbatch_time(settings.runner_seconds),
            sbatch_time_min=format_sbatch_time(settings.time_min_seconds) if settings.time_min_seconds else "",
            extra_args=sbatch_directives(settings.runner_sbatch_args),
        )
        submitter = env.get_template(SUBMITTER_TEMPLATE).render(
            **common,
            job_name=submitter_job_name(chain_id, 0),
            output=output_pattern(logs, "submitter"),
            sbatch_time=format_sbatch_time(settings.submitter_seconds),
            extra_args=sbatch_directives(settings.submitter_sbatch_args),
        )
        mail = (
            env.get_template(MAIL_TEMPLATE).render(**common, job_name=f"{chain_id}.end") if settings.mail_user else ""
        )
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"template {exc.filename or exc.name}:{exc.lineno}: {exc.message}") from None
    except jinja2.TemplateNotFound as exc:
        raise ConfigError(f"template {exc.name} not found") from None
    except RecursionError:
        raise ConfigError("template includes itself (endless recursion)") from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"template error: {exc.message}") from None
    return Scripts(submitter=submitter, runner=runner, mail=mail)


def _launch_line(settings: Settings, python: str) -> str:
    """What the runner starts under ``--launcher`` ("" otherwise), with the
    facts only the running job knows named in capitals (``core.launch.SHOWN_SITE``)."""
    if settings.launcher is Launcher.NONE:
        return ""
    site = dataclasses.replace(SHOWN_SITE, python=python)
    return shlex.join(strategy(settings).argv(settings, site))


def sbatch_directives(args: str) -> list[str]:
    """Extra sbatch arguments as one quoted ``#SBATCH`` line per option:
    ``--constraint 'a|b' --gres=gpu:1`` -> ``--constraint 'a|b'``, ``--gres=gpu:1``."""
    groups: list[list[str]] = []
    for word in shlex.split(args):
        if word.startswith("-") or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return [" ".join(shlex.quote(w) for w in group) for group in groups]
