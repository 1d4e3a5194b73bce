import dataclasses
from pathlib import Path
from typing import Any

import pytest

from chain.api.config import read_config_file
from chain.core.resolution import resolve
from chain.core.settings import BackendName, LaunchMode, Settings
from chain.errors import ConfigError

APP = {"app_cmd": "python3 app.py"}


def test_defaults_follow_the_seed() -> None:
    s = resolve(APP, {}, {})
    assert (s.max_iter, s.ckpt_path, s.checkpoint_every) == (500, "state_iter.txt", 20)
    assert (s.runner_time, s.runner_margin, s.submitter_time, s.submitter_margin) == ("00:03:00", 60, "3:30", 60)
    assert s.launch_mode is LaunchMode.DIRECT and s.srun_args == "-n 1"
    # site-specific seed defaults (anaconda module, centos7 partition) are empty
    assert s.modules == "" and s.partition == ""
    assert s.stop_signal == "TERM" and s.backend is BackendName.AUTO


def test_seed_environment_names() -> None:
    env = {
        "APP_CMD": "x",
        "MAX_ITER": "7",
        "CKPT_PATH": "c",
        "CHECKPOINT_EVERY": "2",
        "RUNNER_TIME_LIMIT": "0:30",
        "RUNNER_MARGIN_SEC": "10",
        "SUBMITTER_TIME_LIMIT": "2",
        "SUBMITTER_MARGIN_SEC": "20",
        "LAUNCH_MODE": "srun",
        "SRUN_ARGS": "-n 2",
        "MODULE_LIST": "a b",
    }
    s = resolve({}, env, {})
    assert s.runner_seconds == 30 and s.submitter_seconds == 120
    assert s.launch_mode is LaunchMode.SRUN and s.srun_argv == ["-n", "2"] and s.module_list == ["a", "b"]


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"max_iter": "0"}, "at least 1"),
        ({"max_iter": "-5"}, "at least 1"),
        ({"max_iter": "ten"}, "integer"),
        ({"runner_time": "1:2:3:4"}, "not a Slurm time"),
        ({"runner_time": "1", "runner_margin": "60"}, "must be smaller"),
        ({"runner_time": "0:30", "runner_margin": "45"}, "must be smaller"),
        ({"submitter_time": "1", "submitter_margin": "90"}, "must be smaller"),
        ({"launch_mode": "mpirun"}, "direct|srun"),
        ({"stop_signal": "KILL"}, "cannot be caught"),
        ({"stop_signal": "BOGUS"}, "not a signal"),
        ({"app_cmd": ""}, "no app command"),
        ({"app_cmd": "   "}, "no app command"),
        ({"srun_args": "-n 'unterminated"}, "quotation"),
        ({"job_name": "has space"}, "1-64 letters, digits"),
        ({"backend": "kubernetes"}, "auto|slurm|local|pyslurm"),
        ({"ckpt_path": "a\nb"}, "single line"),
        # the one text rule: every text setting, hooks and notify commands included
        ({"partition": "gpu\u2028long"}, "single line"),
        ({"qos": "a\u2029b"}, "single line"),
        ({"account": "a\x85b"}, "single line"),
        ({"constraint": "a\x1b]52;c;eA==\x07"}, "single line"),
        ({"runner_sbatch_args": "--comment=a\u2028b"}, "single line"),
        ({"partition": "p" * 5000}, "5000 characters long; at most 4096"),
        ({"hooks": "echo \udcff"}, "not valid UTF-8"),
        ({"notify": "echo \udcfe"}, "not valid UTF-8"),
        ({"notify": ["echo a", "b\u2028c"]}, "single line"),
        ({"hooks": ["true"] * 101}, "at most 100"),
        ({"job_name": "proj/run1"}, "1-64 letters, digits"),
        ({"job_name": "-x"}, "1-64 letters, digits"),
        ({"job_name": "."}, "1-64 letters, digits"),  # never a path's . or .. (the local spool's names/)
        ({"job_name": ".."}, "1-64 letters, digits"),
        ({"job_name": "a" * 65}, "1-64 letters, digits"),
        ({"app_cmd": "echo " + "x" * 200_000}, "at most 131071 fit in one argument"),
        ({"app_cmd": "echo " + "é" * 70_000}, "bytes long; at most 131071"),
    ],
)
def test_bad_values_are_one_line_errors(flags: Any, message: Any) -> None:
    with pytest.raises(ConfigError) as err:
        resolve({**APP, **flags}, {}, {})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_srun_mode_passes_the_task_layout_on() -> None:
    layout = resolve({**APP, "nodes": "2", "ntasks_per_node": "4", "gpus_per_task": "1"}, {}, {})
    assert layout.srun_argv == ["--nodes=2", "--ntasks-per-node=4", "--gpus-per-task=1"]
    own = resolve({**APP, "nodes": "2", "srun_args": "-n 8 --mpi=pmix"}, {}, {})
    assert own.srun_argv == ["-n", "8", "--mpi=pmix"]  # the user's own srun arguments win
    assert resolve(APP, {}, {}).srun_argv == ["-n", "1"]


# --- memory --------------------------------------------------------------------
MEM_SETTINGS = [
    ("runner_mem", "--runner-mem", "CHAIN_RUNNER_MEM"),
    ("submitter_mem", "--submitter-mem", "CHAIN_SUBMITTER_MEM"),
]


@pytest.mark.parametrize("name, flag, env", MEM_SETTINGS)
@pytest.mark.parametrize("value", ["2GB", "4096MB", "1.5G", "-1", "G", "2 G", "two", "4Gi", "1P", "1e3"])
def test_a_memory_size_not_in_slurms_form_is_refused_naming_the_setting(
    name: str, flag: str, env: str, value: str, tmp_path: Path
) -> None:
    """sbatch --mem is a whole number with an optional unit K, M, G or T:
    every layer names the setting it came from, the value and the form."""
    cfg = tmp_path / "chain.toml"
    cfg.write_text(f'{name} = "{value}"\n')
    for flags, environ, file_values, where in (
        ({name: value}, {}, {}, flag),
        ({}, {env: value}, {}, env),
        ({}, {}, read_config_file(cfg), f"config file: {name}"),
    ):
        with pytest.raises(ConfigError) as err:
            resolve({**APP, **flags}, environ, file_values)
        message = str(err.value)
        assert message.startswith(f"{where} {value!r} is not a Slurm memory size: "), message
        assert "K, M, G or T" in message and "\n" not in message


@pytest.mark.parametrize("name, flag, env", MEM_SETTINGS)
@pytest.mark.parametrize(
    "value, kept",
    [
        ("512M", "512M"),
        ("4G", "4G"),
        ("4g", "4G"),
        ("2048", "2048"),
        ("0", "0"),
        ("100K", "100K"),
        ("1T", "1T"),
        (" 8G ", "8G"),
        ("", ""),
        (4096, "4096"),
        (0, "0"),
    ],
)
def test_memory_sizes_in_slurms_form_are_kept(name: str, flag: str, env: str, value: object, kept: str) -> None:
    """As sbatch takes them (0 is all of a node's memory; empty leaves --mem
    out), the unit in capitals (pyslurm reads only those); a TOML integer is
    a number of megabytes."""
    assert getattr(resolve(APP, {}, {name: value}), name) == kept
    if isinstance(value, str):
        assert getattr(resolve({**APP, name: value}, {}, {}), name) == kept


def test_render_refuses_a_bad_memory_size_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from chain.cli.commands import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["render", "--app-cmd", "true", "--runner-mem", "2GB"], env={"CHAIN_BACKEND": "local"}
    )
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr + result.stdout
    assert "--runner-mem '2GB' is not a Slurm memory size" in result.stderr, result.stderr
    ok = CliRunner().invoke(app, ["render", "--app-cmd", "true", "--runner-mem", "2G"], env={"CHAIN_BACKEND": "local"})
    assert ok.exit_code == 0, (ok.stdout, ok.stderr)
    assert "#SBATCH --mem=2G" in ok.stdout, ok.stdout


def test_the_stop_margin_is_the_learned_one_when_larger_and_the_margin_adapts() -> None:
    settings = Settings(runner_margin=60)
    assert (settings.stop_margin(0), settings.stop_margin(90), settings.stop_margin(30)) == (60, 90, 60)
    fixed = dataclasses.replace(settings, adaptive_margin=False)
    assert fixed.stop_margin(90) == 60
