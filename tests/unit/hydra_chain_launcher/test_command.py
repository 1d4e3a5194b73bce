"""The app command each chain of a multirun runs: composed once for the
sweep, filled in per job by the sweep's placeholders, completed by the job
program with the job's overrides and directory."""

from __future__ import annotations

import shlex

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from chain.errors import ConfigError
from chain.sweep.command import point_command
from hydra_plugins.hydra_chain_launcher._command import (
    JOB_MODULE,
    AppCall,
    app_template,
    config_args,
    hydra_value,
    job_argv,
    job_point,
    kept_hydra_overrides,
    main_target,
    override_key,
)

CALLBACK_OVERRIDE = (
    "++hydra.callbacks.chain_return._target_=hydra_plugins.hydra_chain_launcher._callback.SaveReturnValue"
)
CALL = AppCall("/venv/bin/python", ("/w/train.py",), ("--config-name=config",), ("hydra.job.name=t",))


def test_a_jobs_parameters_are_its_number_and_its_overrides_as_one_shell_line() -> None:
    point = job_point(3, ["lr=0.001", "name='a b'"])
    assert point.as_dict() == {"job_num": 3, "overrides": "lr=0.001 'name='\"'\"'a b'\"'\"''"}
    assert shlex.split(str(point.as_dict()["overrides"])) == ["lr=0.001", "name='a b'"]


def test_a_jobs_overrides_past_a_values_length_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="job 3's overrides: a value of"):
        job_point(3, [f"x{i}={'v' * 60}" for i in range(20)])


def test_the_sweeps_command_runs_the_job_program_then_the_app_with_the_jobs_parameters() -> None:
    point = job_point(3, ["lr=0.001", "seed=0"])
    command = point_command(app_template(CALL), point, "3")
    exports, _, run = command.partition("; ")
    assert exports == "export CHAIN_SWEEP_POINT=3 CHAIN_PARAM_JOB_NUM=3 CHAIN_PARAM_OVERRIDES='lr=0.001 seed=0'"
    assert shlex.split(run) == [
        "/venv/bin/python", "-m", JOB_MODULE, "3", "lr=0.001 seed=0", "--",
        "/venv/bin/python", "/w/train.py", "--config-name=config", "hydra.job.name=t",
    ]  # fmt: skip


def test_a_module_app_gets_its_import_directory() -> None:
    call = AppCall("/py", ("-m", "pkg.train"), pythonpath="/w")
    words = shlex.split(app_template(call).replace("{job_num}", "0").replace("{overrides}", "x=1"))
    assert words[words.index("--") - 2 :] == ["--pythonpath", "/w", "--", "/py", "-m", "pkg.train"]


def test_a_placeholder_in_the_apps_command_line_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"holds \{name\}"):
        app_template(AppCall("/py", ("/w/t.py",), (), ("hydra.job.name={seed}",)))
    assert "${now:%H}" in app_template(AppCall("/py", ("/w/t.py",), (), ("hydra.sweep.dir=m/${now:%H}",)))


def test_the_job_gets_its_overrides_directory_number_and_single_run_mode() -> None:
    argv = job_argv(["/py", "/w/t.py"], 4, "lr=0.1 'name=a b'", "/runs/lr=0.1,seed=0")
    assert argv == [
        "/py", "/w/t.py", "lr=0.1", "name=a b",
        r"hydra.run.dir=/runs/lr\=0.1\,seed\=0", "hydra.job.num=4", "hydra.mode=RUN", CALLBACK_OVERRIDE,
    ]  # fmt: skip


@pytest.mark.parametrize("path", ["/runs/0", "/r/lr=0.1,seed=0", "/r/a b/(x)[y]{z}:w", "/r/back\\slash", "/r/+o=a"])
def test_a_run_directory_reads_back_through_hydras_parser_as_itself(path: str) -> None:
    parsed = OverridesParser.create().parse_override(f"hydra.run.dir={hydra_value(path)}")
    assert parsed.value() == path


def test_a_run_directory_with_a_dollar_is_refused() -> None:
    with pytest.raises(ConfigError, match="interpolation"):
        hydra_value("/r/${x}")


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("hydra/launcher=chain", "hydra.launcher"),
        ("+hydra.sweeper.x=1", "hydra.sweeper.x"),
        ("~db", "db"),
        ("a@b=c", "a"),
    ],
)
def test_an_overrides_key_is_dotted(override: str, key: str) -> None:
    assert override_key(override) == key


def test_a_job_keeps_the_hydra_overrides_but_the_launchers_sweepers_sweep_dirs_mode_and_its_own() -> None:
    given = [
        "hydra/launcher=chain",
        "hydra.launcher.max_iter=3",
        "hydra/sweeper=basic",
        "+hydra.sweeper.max_batch_size=2",
        "hydra.mode=MULTIRUN",
        "hydra.run.dir=x",
        "hydra.job.num=1",
        "hydra.job.name=t",
        "hydra/job_logging=disabled",
        "hydra.launcherish=1",
        "hydra.sweep.dir=runs",
        "hydra.sweep.subdir=${hydra.job.override_dirname}",
    ]
    assert kept_hydra_overrides(given) == ("hydra.job.name=t", "hydra/job_logging=disabled", "hydra.launcherish=1")


def test_the_config_is_found_again_by_its_name_and_file_directories() -> None:
    sources = [
        ("hydra", "pkg", "hydra.conf"),
        ("main", "file", "/w/conf"),
        ("command-line", "file", "/w/extra"),
        ("schema", "structured", "://"),
    ]
    assert config_args("config", sources) == ("--config-name=config", "--config-path=/w/conf", "--config-dir=/w/extra")
    assert config_args(None, [("main", "pkg", "app.conf")]) == ()


def test_the_app_is_its_script_by_absolute_path_or_its_module() -> None:
    assert main_target("train.py", None, "/w") == (("/w/train.py",), "")
    assert main_target("./sub/../train.py", None, "/w") == (("/w/train.py",), "")
    assert main_target("/abs/train.py", None, "/w") == (("/abs/train.py",), "")
    assert main_target("/w/pkg/__main__.py", "pkg.__main__", "/w") == (("-m", "pkg"), "/w")
    with pytest.raises(ConfigError, match="from a script file"):
        main_target("-c", None, "/w")
