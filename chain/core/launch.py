"""How the runner starts the app: one strategy per way (``Settings.launcher``
over ``Settings.launch_mode``), each composing the command line, saying how
the stop signal reaches the app and how many ranks report their end. Pure:
the runner gathers the facts of its allocation (``LaunchSite``) and runs
what the strategy composes.

- ``direct``: ``bash -c APP_CMD``, signalled through its process group.
- ``srun``: ``srun SRUN_ARGS bash -c APP_CMD``, signalled through the job's
  steps (srun turns a SIGTERM of its own into killing the step).
- ``torchrun`` and ``accelerate``: one launcher per node under srun, its
  arguments composed from the allocation: the nodes, the processes per node,
  a c10d rendezvous on the first node (the one that runs srun), on a port
  free there, and the run's id. APP_CMD is then what the user would give the
  launcher: its own options, then the script and its arguments (or ``-m
  MODULE``). Each worker runs through chain's rank wrapper, which records
  the rank's end (``chain.core.rankends``).
"""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass

from chain.core.launchers import FORWARDED, simple_commands
from chain.core.settings import Launcher, LaunchMode, Settings
from chain.primitives.signals import signal_named


@dataclass(frozen=True)
class LaunchSite:
    """The facts of the runner's allocation a launch is composed from."""

    python: str  # the job's Python (chain's own interpreter)
    worker: str  # the rank wrapper's path (chain/launch/rank_run.py)
    job_id: str
    port: str  # the rendezvous port, free on the first node ("": the strategy has no rendezvous)
    gpus_on_node: int = 0  # SLURM_GPUS_ON_NODE (0: none or unknown)
    srun: bool = True  # the backend runs job steps (Slurm); the local backend has none: one node, no srun


SHOWN_SITE = LaunchSite(python="PYTHON", worker="RANK_WRAPPER", job_id="$SLURM_JOB_ID", port="PORT")
"""What ``chain render`` shows in place of the facts only the running job knows."""


class LaunchStrategy(ABC):
    """One way of starting the app."""

    name: str
    package: str = ""  # a module the job's Python must have ("": none)
    rendezvous: bool = False  # its processes meet at a port on the first node (LaunchSite.port)

    def steps(self, site: LaunchSite) -> bool:
        """Whether the stop signal goes to the job's steps through the
        scheduler (srun's tasks), not to the started command's process group."""
        return False

    @abstractmethod
    def argv(self, settings: Settings, site: LaunchSite) -> list[str]:
        """The command the runner starts."""

    def problem(self, settings: Settings) -> str | None:
        """Why these settings cannot be launched this way (one line), or None."""
        return None

    def world(self, settings: Settings, site: LaunchSite) -> int:
        """How many ranks record their end (0: none do; judge by the exit code)."""
        return 0


class Direct(LaunchStrategy):
    name = "direct"

    def argv(self, settings: Settings, site: LaunchSite) -> list[str]:
        return ["bash", "-c", settings.app_cmd]


class Srun(LaunchStrategy):
    name = "srun"

    def steps(self, site: LaunchSite) -> bool:
        return True

    def argv(self, settings: Settings, site: LaunchSite) -> list[str]:
        return ["srun", *settings.srun_argv, "bash", "-c", settings.app_cmd]


_TARGET = re.compile(r"[^=]*\.py")
# the shell's own syntax in a word: such a word is expanded on each node, as inside double quotes
_EXPANDS = re.compile(r"[$`]")


def split_target(words: list[str]) -> tuple[list[str], list[str]] | None:
    """(the launcher's options, the script or ``-m MODULE`` and what follows),
    or None when no word names a script ending in ``.py`` or a module."""
    for i, word in enumerate(words):
        if word in ("-m", "--module") and i + 1 < len(words):
            return words[:i], words[i:]
        if not word.startswith("-") and _TARGET.fullmatch(word):
            return words[:i], words[i:]
    return None


def shell_word(word: str) -> str:
    """``word`` for ``bash -c``: quoted, but with ``$VAR`` and ``$(...)``
    expanded on each node, as inside double quotes."""
    if not _EXPANDS.search(word):
        return shlex.quote(word)
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Distributed(LaunchStrategy):
    """A launcher run once per node under srun, its workers through the rank wrapper."""

    module = ""  # what ``python -m`` runs
    composed: frozenset[str] = frozenset()  # the options chain composes (spelled with dashes)
    rendezvous = True

    def steps(self, site: LaunchSite) -> bool:
        return site.srun

    def nodes(self, settings: Settings, site: LaunchSite) -> int:
        return max(settings.nodes, 1) if site.srun else 1

    def nproc(self, settings: Settings, site: LaunchSite) -> int:
        return settings.nproc_per_node or site.gpus_on_node or 1

    def world(self, settings: Settings, site: LaunchSite) -> int:
        return self.nodes(settings, site) * self.nproc(settings, site)

    def problem(self, settings: Settings) -> str | None:
        flag = f"with --launcher {self.name}"
        words = _words(settings.app_cmd)
        commands = simple_commands(settings.app_cmd)
        if len(commands) != 1 or len(commands[0]) != len(words):
            return (
                f"{flag}, --app-cmd is one command: [{self.name} options] SCRIPT.py [ARGS] "
                "(no ;, |, &&, redirections or variable assignments)"
            )
        parts = split_target(words)
        if parts is None:
            return f"{flag}, --app-cmd is [{self.name} options] SCRIPT.py [ARGS] or -m MODULE [ARGS]: no script found"
        stray = _stray(parts[0])
        if stray is not None:
            return (
                f"{flag}, --app-cmd is [{self.name} options] SCRIPT.py [ARGS]: {stray!r} is neither an option "
                f"nor its value ({self.name} starts Python itself)"
            )
        clash = [w for w in parts[0] if _option(w) in self.composed]
        if clash:
            return f"{flag}, chain sets {clash[0].split('=')[0]} from the allocation: leave it out of --app-cmd"
        if signal_named(settings.stop_signal) not in FORWARDED:
            return (
                f"{flag}, the stop signal must be one {self.name} passes on to its workers: --stop-signal TERM (or INT)"
            )
        if settings.srun_args != Settings.srun_args:
            return f"{flag}, chain composes srun's arguments: leave out --srun-args"
        if settings.ntasks_per_node > 1 or settings.ntasks > max(settings.nodes, 1):
            return (
                f"{flag}, each node runs one launcher: use --nproc-per-node for its processes, "
                "not --ntasks or --ntasks-per-node"
            )
        return None

    def argv(self, settings: Settings, site: LaunchSite) -> list[str]:
        nodes = self.nodes(settings, site)
        options, target = split_target(_words(settings.app_cmd)) or ([], _words(settings.app_cmd))
        line = [
            "exec",
            shlex.quote(site.python),
            "-m",
            self.module,
            *self.options(settings, site),
            *(shell_word(w) for w in options),
            shlex.quote(site.worker),
            *(shell_word(w) for w in target),
        ]
        script = self.prologue(site) + " ".join(line)
        if not site.srun:
            return ["bash", "-c", script]
        srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1"]
        srun.append(f"--cpus-per-task={settings.cpus_per_task}")
        if settings.gpus_per_task:
            srun.append(f"--gpus-per-task={settings.gpus_per_task}")
        return [*srun, "bash", "-c", script]

    def prologue(self, site: LaunchSite) -> str:
        """Shell run on each node before the launcher (ending in ``; `` when not empty)."""
        return ""

    @abstractmethod
    def options(self, settings: Settings, site: LaunchSite) -> list[str]:
        """The launcher's options chain composes, as ``bash -c`` words."""


def first_node(site: LaunchSite) -> str:
    """The rendezvous host: the node that runs srun (the batch host, the
    allocation's first), as each node's srun task knows it; without srun, this one."""
    return '"$SLURM_LAUNCH_NODE_IPADDR"' if site.srun else "127.0.0.1"


class Torchrun(_Distributed):
    name = "torchrun"
    module = "torch.distributed.run"
    package = "torch.distributed.run"
    composed = frozenset(
        {
            "--nnodes",
            "--nproc-per-node",
            "--node-rank",
            "--rdzv-backend",
            "--rdzv-endpoint",
            "--rdzv-id",
            "--master-addr",
            "--master-port",
            "--standalone",
            "--no-python",
            "--run-path",
            "--rdzv-conf",
            "--local-addr",
        }
    )

    def prologue(self, site: LaunchSite) -> str:
        # The first node hosts the rendezvous and says so (torch would otherwise resolve each node's
        # hostname to tell, which fails where node names resolve nowhere), and gives its address
        # for the workers' process group, which it serves when it is rank 0 (ranks follow the
        # sorted addresses); the other nodes give theirs as their hostnames resolve.
        if not site.srun:
            return ""
        return (
            'if [ "$SLURM_NODEID" = 0 ]; then node=(--local-addr="$SLURM_LAUNCH_NODE_IPADDR" '
            "--rdzv-conf=is_host=1); else node=(--rdzv-conf=is_host=0); fi; "
        )

    def options(self, settings: Settings, site: LaunchSite) -> list[str]:
        return [
            f"--nnodes={self.nodes(settings, site)}",
            f"--nproc-per-node={self.nproc(settings, site)}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={first_node(site)}:{shell_word(site.port)}",
            f"--rdzv-id={shell_word('chain-' + site.job_id)}",
            *(['"${node[@]}"'] if site.srun else []),
        ]


class Accelerate(_Distributed):
    name = "accelerate"
    module = "accelerate.commands.launch"
    package = "accelerate.commands.launch"
    composed = frozenset(
        {
            "--num-machines",
            "--num-processes",
            "--machine-rank",
            "--main-process-ip",
            "--main-process-port",
            "--rdzv-backend",
            "--same-network",
            "--multi-gpu",
            "--cpu",
            "--no-python",
        }
    )

    def options(self, settings: Settings, site: LaunchSite) -> list[str]:
        nodes = self.nodes(settings, site)
        total = self.world(settings, site)
        return [
            *(["--multi_gpu"] if total > 1 else []),  # accelerate's torchrun path, CPUs too
            f"--num_machines={nodes}",
            f"--num_processes={total}",
            '--machine_rank="$SLURM_NODEID"' if site.srun else "--machine_rank=0",
            f"--main_process_ip={first_node(site)}",
            f"--main_process_port={shell_word(site.port)}",
            # accelerate's static rendezvous at the first node's address and the free port, on one
            # machine as on several (--same_network: every node reaches that address; c10d would
            # tell the rendezvous host and the workers' master address by the nodes' hostnames,
            # which accelerate cannot replace as chain does for torchrun, and which resolve
            # nowhere on some clusters; on one machine it would also take port 29400)
            *(["--same_network"] if nodes > 1 else []),
        ]


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _stray(options: list[str]) -> str | None:
    """The first of the launcher's words that is neither an option nor the value of the one before."""
    for i, word in enumerate(options):
        if not word.startswith("-") and (i == 0 or not options[i - 1].startswith("-") or "=" in options[i - 1]):
            return word
    return None


def _option(word: str) -> str:
    """An option's name with dashes (``--nproc_per_node=4`` -> ``--nproc-per-node``)."""
    name = word.split("=", 1)[0]
    return "--" + name.lstrip("-").replace("_", "-") if name.startswith("--") else name


STRATEGIES: dict[Launcher, LaunchStrategy] = {Launcher.TORCHRUN: Torchrun(), Launcher.ACCELERATE: Accelerate()}
_BY_MODE: dict[LaunchMode, LaunchStrategy] = {LaunchMode.DIRECT: Direct(), LaunchMode.SRUN: Srun()}


def launched_script(settings: Settings) -> str | None:
    """The script a launcher runs (``train.py`` of ``--max-restarts 1 train.py
    ARGS``), or None: no launcher, a module (``-m``), or no script found."""
    if settings.launcher is Launcher.NONE:
        return None
    parts = split_target(_words(settings.app_cmd))
    return parts[1][0] if parts and parts[1][0] not in ("-m", "--module") else None


def strategy(settings: Settings) -> LaunchStrategy:
    """How these settings start the app: the launcher's, else the launch mode's."""
    return STRATEGIES.get(settings.launcher) or _BY_MODE[settings.launch_mode]
