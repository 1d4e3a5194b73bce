"""Golden files of the rendered sbatch scripts, and quoting of hostile values."""

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chain.api.templating import Scripts, render_scripts
from chain.backends.local.sbatch import substitute
from chain.core.resolution import resolve
from chain.errors import ConfigError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"  # tests/unit/golden
CASES: dict[str, dict[str, Any]] = {
    "default": {"app_cmd": "python3 app.py"},
    "full": {
        "app_cmd": "python3 app.py",
        "modules": "gcc/12 openmpi",
        "partition": "gpu",
        "qos": "long",
        "account": "proj1",
        "runner_mem": "4G",
        "cpus_per_task": "4",
        "ntasks": "2",
        "runner_sbatch_args": "--gres=gpu:1 --constraint 'a100|h100'",
        "submitter_sbatch_args": "--nice=10",
        "runner_time": "1-00:00:00",
        "runner_margin": "300",
        "submitter_time": "2-00:00:00",
        "submitter_margin": "600",
        "stop_signal": "INT",
    },
    "resources": {
        "app_cmd": "python3 train.py",
        "gpus": "a100:2",
        "gpus_per_task": "1",
        "nodes": "2",
        "ntasks_per_node": "2",
        "constraint": "ib&(a100|h100)",
        "runner_time": "1-00:00:00",
        "time_min": "12:00:00",
        "exclusive": "true",
        "launch_mode": "srun",
    },
    "mail": {
        "app_cmd": "python3 app.py",
        "mail_user": "ada@example.org",
        "partition": "gpu",
        "account": "proj1",
        "mode": "relay",
        "notify": ["echo done"],
    },
}


def _render(
    flags: dict[str, Any], chain_dir: str = "/scratch/u/run/.chain", workdir: str = "/scratch/u/run"
) -> Scripts:
    return render_scripts(
        resolve(flags, {}, {}),
        chain_id="chain-abc123",
        chain_dir=Path(chain_dir),
        workdir=Path(workdir),
        python="/opt/venv/bin/python3",
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: Any) -> None:
    scripts = _render(CASES[case])
    rendered = [("submitter", scripts.submitter), ("runner", scripts.runner)]
    if scripts.mail:
        rendered.append(("mail", scripts.mail))
    assert bool(scripts.mail) == ("mail_user" in CASES[case]), "a mail script without --mail-user, or none with it"
    for kind, text in rendered:
        path = GOLDEN / f"{case}.{kind}.sbatch"
        if os.environ.get("UPDATE_GOLDEN"):
            path.write_text(text)
        assert text == path.read_text(), f"{path} differs (UPDATE_GOLDEN=1 to accept)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_scripts_pass_bash_n_and_sbatch_lines_come_first(case: Any, tmp_path: Path) -> None:
    scripts = _render(CASES[case])
    for text in (scripts.submitter, scripts.runner, scripts.mail):
        if not text:
            continue
        script = tmp_path / "s.sh"
        script.write_text(text)
        assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
        lines = text.splitlines()
        first_command = next(i for i, l in enumerate(lines[1:], 1) if l.strip() and not l.startswith("#"))
        assert all(i < first_command for i, l in enumerate(lines) if l.startswith("#SBATCH"))


def test_runner_time_is_rounded_up_to_minutes() -> None:
    scripts = _render(
        {
            "app_cmd": "x",
            "runner_time": "0:30",
            "runner_margin": "10",
            "submitter_time": "1:30",
            "submitter_margin": "20",
        }
    )
    assert "#SBATCH --time=00:01:00" in scripts.runner
    assert "#SBATCH --time=00:02:00" in scripts.submitter


HOSTILE = 'it\'s "$(touch /tmp/pwned)" `id` ; rm -rf ~ $HOME'


def test_hostile_values_stay_literal(tmp_path: Path) -> None:
    chain_dir = tmp_path / f"we ird {HOSTILE[:12]}"
    scripts = _render(
        {"app_cmd": "x", "partition": HOSTILE, "modules": HOSTILE[:20]}, chain_dir=str(chain_dir), workdir=str(tmp_path)
    )
    # Evaluate every quoted word the way bash would, without running anything:
    # each #SBATCH value and the module names must come back literally.
    runner = scripts.runner
    line = next(l for l in runner.splitlines() if l.startswith("#SBATCH --partition="))
    word = line.removeprefix("#SBATCH --partition=")
    echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=False).stdout
    assert echoed == HOSTILE
    assert not Path("/tmp/pwned").exists()


@pytest.mark.parametrize("name", ["100%j", "a%xb", "50%%", "trailing%", "%u%N%A%a"])
def test_a_percent_in_the_chain_directory_is_not_a_filename_pattern(name: str) -> None:
    """sbatch expands %j, %x, ... anywhere in --output: unescaped in the
    directory, the job's log went to a directory that does not exist and
    Slurm failed every job with no log (exit 0:53), the chain stalled."""
    chain_dir = f"/scratch/u/{name}/.chain"
    scripts = _render({"app_cmd": "x"}, chain_dir=chain_dir, workdir=f"/scratch/u/{name}")
    for kind, text in (("runner", scripts.runner), ("submitter", scripts.submitter)):
        line = next(l for l in text.splitlines() if l.startswith("#SBATCH --output="))
        (pattern,) = shlex.split(line.removeprefix("#SBATCH --output="))
        # expanded as sbatch does (the local backend's copy of its filename patterns)
        assert substitute(pattern, "77", "chain-abc123.r1", "u") == f"{chain_dir}/logs/{kind}-77.out"


def test_a_backslash_in_the_chain_directory_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="holds a backslash") as caught:
        _render({"app_cmd": "x"}, chain_dir="/scratch/u/a\\b/.chain", workdir="/scratch/u/a\\b")
    assert "\n" not in str(caught.value)


def test_user_template_dir_overrides(tmp_path: Path) -> None:
    (tmp_path / "runner.sbatch.j2").write_text(
        "#!/bin/bash\n#SBATCH --time={{ sbatch_time }}\necho {{ s.app_cmd | q }}\n"
    )
    scripts = render_scripts(
        resolve({"app_cmd": "a b", "template_dir": str(tmp_path)}, {}, {}),
        chain_id="c-1",
        chain_dir=tmp_path / ".chain",
        workdir=tmp_path,
    )
    assert scripts.runner == "#!/bin/bash\n#SBATCH --time=00:03:00\necho 'a b'\n"
    assert "_submitter" in scripts.submitter  # the built-in one still serves the other


@pytest.mark.parametrize(
    "body, message",
    [
        ("{% if %}", r"template .*/runner.sbatch.j2:1: Expected an expression"),
        ("{{ no_such_value }}", "no_such_value"),
    ],
)
def test_broken_user_template_is_a_config_error(tmp_path: Path, body: Any, message: Any) -> None:
    (tmp_path / "runner.sbatch.j2").write_text(body)
    with pytest.raises(ConfigError, match=message):
        render_scripts(
            resolve({"app_cmd": "x", "template_dir": str(tmp_path)}, {}, {}),
            chain_id="c-1",
            chain_dir=tmp_path / ".chain",
            workdir=tmp_path,
        )


def test_missing_template_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        render_scripts(
            resolve({"app_cmd": "x", "template_dir": str(tmp_path / "nope")}, {}, {}),
            chain_id="c-1",
            chain_dir=tmp_path,
            workdir=tmp_path,
        )


def test_templates_are_compiled_once_and_read_anew_at_each_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jinja2

    from chain.api import templating

    compiled: list[str] = []
    real = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: Any, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        compiled.append(str(name))
        return real(self, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    monkeypatch.setattr(templating, "_COMPILED", templating._CompiledTemplates())
    user = tmp_path / "templates"
    user.mkdir()
    settings = resolve({"app_cmd": "a", "template_dir": str(user)}, {}, {})

    def runner() -> str:
        return render_scripts(settings, chain_id="c-1", chain_dir=tmp_path / ".chain", workdir=tmp_path).runner

    shipped = runner()
    assert "_runner" in shipped and runner() == shipped
    assert sorted(compiled) == ["runner.sbatch.j2", "submitter.sbatch.j2"]  # the second render compiled nothing
    (user / "runner.sbatch.j2").write_text("one {{ chain_id }}\n")  # added after the first render
    assert runner() == "one c-1\n"
    os.utime(user / "runner.sbatch.j2", (1_000_000, 1_000_000))
    (user / "runner.sbatch.j2").write_text("two {{ chain_id }}\n")
    os.utime(user / "runner.sbatch.j2", (1_000_000, 1_000_000))  # edited, its mtime the same
    assert runner() == "two c-1\n"
    (user / "runner.sbatch.j2").unlink()
    assert runner() == shipped
    assert compiled.count("runner.sbatch.j2") == 3  # the shipped one, "one", "two": each source once
    assert templating.jinja_env().filters is not templating.jinja_env().filters  # nothing shared to change
