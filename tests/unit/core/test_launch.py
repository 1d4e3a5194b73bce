"""The launch strategies: what the runner starts for each way, composed from
the settings and the allocation's facts, and the settings each refuses."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from chain.core.launch import (
    SHOWN_SITE,
    LaunchSite,
    launched_script,
    shell_word,
    split_target,
    strategy,
)
from chain.core.resolution import resolve
from chain.core.settings import Launcher, LaunchMode, Settings
from chain.errors import ConfigError

SITE = LaunchSite(python="/v/bin/python", worker="/site/chain/launch/rank_run.py", job_id="4711", port="29512")
LOCAL = dataclasses.replace(SITE, srun=False)


def _settings(**values: object) -> Settings:
    return dataclasses.replace(Settings(app_cmd="train.py"), **values)  # type: ignore[arg-type]


def test_direct_and_srun_are_the_app_command_under_bash() -> None:
    direct = _settings(app_cmd="python3 app.py")
    assert strategy(direct).argv(direct, SITE) == ["bash", "-c", "python3 app.py"]
    assert not strategy(direct).steps(SITE)
    srun = _settings(app_cmd="python3 app.py", launch_mode=LaunchMode.SRUN, nodes=2, ntasks_per_node=1)
    assert strategy(srun).argv(srun, SITE) == [
        "srun",
        "--nodes=2",
        "--ntasks-per-node=1",
        "bash",
        "-c",
        "python3 app.py",
    ]
    assert strategy(srun).steps(SITE)
    assert strategy(srun).world(srun, SITE) == 0  # judged by the exit code: no rank records


def _node_words(script: str, node_id: str) -> list[str]:
    """The words a node's bash would exec for ``script`` (``exec`` shown instead of run)."""
    env = {"SLURM_LAUNCH_NODE_IPADDR": "10.0.0.7", "SLURM_NODEID": node_id, "PATH": "/usr/bin:/bin"}
    shown = script.replace("exec ", "printf '%s\\n' ", 1)
    out = subprocess.run(["bash", "-c", shown], env=env, capture_output=True, text=True, check=True).stdout
    return out.split("\n")[:-1]


def test_torchrun_is_one_launcher_a_node_with_the_rendezvous_on_the_first() -> None:
    s = _settings(launcher=Launcher.TORCHRUN, nodes=2, nproc_per_node=4, app_cmd="--max-restarts 0 train.py --lr 3e-4")
    argv = strategy(s).argv(s, SITE)
    assert argv[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=1"]
    assert argv[5:7] == ["bash", "-c"]
    common = [
        "/v/bin/python",
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.7:29512",
        "--rdzv-id=chain-4711",
    ]
    tail = ["--max-restarts", "0", "/site/chain/launch/rank_run.py", "train.py", "--lr", "3e-4"]
    # the first node hosts the rendezvous and gives its address; the others join it
    assert _node_words(argv[7], "0") == [*common, "--local-addr=10.0.0.7", "--rdzv-conf=is_host=1", *tail]
    assert _node_words(argv[7], "1") == [*common, "--rdzv-conf=is_host=0", *tail]
    assert strategy(s).world(s, SITE) == 8
    assert strategy(s).steps(SITE)


def test_processes_per_node_default_to_the_nodes_gpus_else_one() -> None:
    s = _settings(launcher=Launcher.TORCHRUN, nodes=3)
    assert strategy(s).world(s, SITE) == 3
    assert strategy(s).world(s, dataclasses.replace(SITE, gpus_on_node=4)) == 12
    assert "--nproc-per-node=4" in strategy(s).argv(s, dataclasses.replace(SITE, gpus_on_node=4))[7]


def test_without_job_steps_the_launcher_runs_here_on_one_node() -> None:
    s = _settings(launcher=Launcher.TORCHRUN, nodes=2, nproc_per_node=2)
    argv = strategy(s).argv(s, LOCAL)
    assert argv[:2] == ["bash", "-c"]
    assert "--nnodes=1" in argv[2] and "--rdzv-endpoint=127.0.0.1:29512" in argv[2]
    assert argv[2].startswith("exec ") and "is_host" not in argv[2]  # a loopback endpoint: this node hosts
    assert strategy(s).world(s, LOCAL) == 2
    assert not strategy(s).steps(LOCAL)  # the launcher's process group gets the signal; it forwards it


def test_accelerate_gets_its_own_spelling_and_passes_the_users_options_on() -> None:
    s = _settings(
        launcher=Launcher.ACCELERATE, nodes=2, nproc_per_node=2, app_cmd="--config-file cfg.yaml -m pkg.train x"
    )
    words = _node_words(strategy(s).argv(s, SITE)[7], "1")
    assert words[:3] == ["/v/bin/python", "-m", "accelerate.commands.launch"]
    assert {"--multi_gpu", "--num_machines=2", "--num_processes=4", "--main_process_port=29512"} <= set(words)
    assert {"--machine_rank=1", "--main_process_ip=10.0.0.7"} <= set(words)
    assert words[-6:] == ["--config-file", "cfg.yaml", "/site/chain/launch/rank_run.py", "-m", "pkg.train", "x"]


def test_one_accelerate_process_is_not_multi_gpu() -> None:
    s = _settings(launcher=Launcher.ACCELERATE, nproc_per_node=1)
    assert "--multi_gpu" not in strategy(s).argv(s, SITE)[7]


def test_accelerate_keeps_its_static_rendezvous_at_the_first_nodes_address() -> None:
    one = _settings(launcher=Launcher.ACCELERATE, nproc_per_node=2)
    line = strategy(one).argv(one, SITE)[7]
    assert "--rdzv_backend" not in line and "--same_network" not in line  # its c10d would take port 29400
    two = _settings(launcher=Launcher.ACCELERATE, nodes=2)
    line = strategy(two).argv(two, SITE)[7]
    # several machines: the address given, never a hostname to resolve (c10d's)
    assert "--same_network" in line and "--rdzv_backend" not in line


def test_a_word_with_a_variable_is_expanded_and_any_other_stays_as_written() -> None:
    assert shell_word("out dir") == "'out dir'"
    assert shell_word('$SCRATCH/"x"') == '"$SCRATCH/\\"x\\""'
    line = "printf '%s\\n' " + " ".join(shell_word(w) for w in ["$HOME/a b", "it's", "`x`"])
    out = subprocess.run(["bash", "-c", line], env={"HOME": "/h"}, capture_output=True, text=True, check=False)
    assert out.stdout.splitlines()[:2] == ["/h/a b", "it's"]


@pytest.mark.parametrize(
    ("words", "parts"),
    [
        (["train.py", "--lr", "1"], ([], ["train.py", "--lr", "1"])),
        (["--max-restarts", "0", "./sub/train.py"], (["--max-restarts", "0"], ["./sub/train.py"])),
        (["--config-file", "c.yaml", "-m", "pkg.train"], (["--config-file", "c.yaml"], ["-m", "pkg.train"])),
        (["--log-file=x.py", "t.py"], (["--log-file=x.py"], ["t.py"])),
        (["echo", "hi"], None),
        (["-m"], None),
    ],
)
def test_the_script_is_the_first_py_word_or_a_module(words: list[str], parts: object) -> None:
    assert split_target(words) == parts


@pytest.mark.parametrize(
    ("app_cmd", "says"),
    [
        ("train.py; rm -rf x", "one command"),
        ("train.py | tee log", "one command"),
        ("X=1 train.py", "one command"),
        ("train.py > log", "one command"),
        ("python3 train.py", "starts Python itself"),
        ("echo hi", "no script found"),
        ("--nnodes 4 train.py", "chain sets --nnodes"),
        ("--nproc_per_node=2 train.py", "chain sets --nproc_per_node"),
        ("--rdzv-endpoint x:1 train.py", "chain sets --rdzv-endpoint"),
    ],
)
def test_torchrun_refuses_what_it_cannot_compose(app_cmd: str, says: str) -> None:
    s = _settings(launcher=Launcher.TORCHRUN, app_cmd=app_cmd)
    problem = strategy(s).problem(s)
    assert problem is not None and says in problem and "\n" not in problem


def test_a_launcher_refuses_tasks_per_node_srun_args_and_an_unforwarded_signal() -> None:
    for values in ({"ntasks_per_node": 2}, {"ntasks": 4, "nodes": 2}):
        s = _settings(launcher=Launcher.TORCHRUN, **values)
        assert "--nproc-per-node" in (strategy(s).problem(s) or "")
    s = _settings(launcher=Launcher.ACCELERATE, srun_args="-n 4")
    assert "--srun-args" in (strategy(s).problem(s) or "")
    s = _settings(launcher=Launcher.TORCHRUN, stop_signal="USR1")
    assert "--stop-signal TERM" in (strategy(s).problem(s) or "")


def test_settings_with_a_launcher_get_one_task_a_node_and_are_refused_in_one_line() -> None:
    s = resolve({"launcher": "torchrun", "nodes": "2", "app_cmd": "train.py"}, {}, {})
    assert s.ntasks_per_node == 1
    with pytest.raises(ConfigError, match="chain sets --nnodes"):
        resolve({"launcher": "torchrun", "app_cmd": "--nnodes 2 train.py"}, {}, {})


def test_the_launched_script_is_named_for_the_submit_check() -> None:
    assert launched_script(_settings(launcher=Launcher.TORCHRUN, app_cmd="--max-restarts 1 t.py a")) == "t.py"
    assert launched_script(_settings(launcher=Launcher.TORCHRUN, app_cmd="-m pkg.train")) is None
    assert launched_script(_settings(app_cmd="t.py")) is None


def test_render_shows_the_facts_only_the_job_knows_in_capitals() -> None:
    s = _settings(launcher=Launcher.TORCHRUN)
    line = strategy(s).argv(s, SHOWN_SITE)[-1]
    assert '--rdzv-endpoint="$SLURM_LAUNCH_NODE_IPADDR":PORT' in line and "RANK_WRAPPER train.py" in line
