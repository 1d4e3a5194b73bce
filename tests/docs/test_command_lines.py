"""Every ``chain ...`` command line of the docs is one the CLI takes.

The command lines of README.md, docs/ and the examples' READMEs, in code
blocks and in inline code (continuations joined, ``$VARS`` given a value,
``...`` left out; ``snippets.py``), are parsed by the real command line
without running it: a renamed or removed command or flag fails here. Each
``chain submit`` line of a code block is rendered (``chain render`` with its
settings), so its values are checked too, and a cluster example (runners of
an hour or more) must say how much memory and how many CPUs its runner gets.
The GPU recipe's ``#SBATCH`` lines are what ``chain render`` prints.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import snippets as sn
from snippets import DOCS


def _group():  # type: ignore[no-untyped-def]
    import typer.main

    from chain.cli.commands import app

    return typer.main.get_command(app)


def parse_command(args: list[str] | tuple[str, ...], *, inline: bool = False) -> str | None:
    """Parse ``chain ARGS`` as the CLI would, without running it: None, or
    what is wrong. ``inline``: a command named in prose may leave out a
    required option (``chain _runner``)."""
    import typer

    from chain.cli.group import click

    group = _group()
    args = list(args)
    own = {opt for p in group.params for opt in p.opts} | {"-h", "--help"}  # help: from the context settings
    while args and args[0].startswith("-"):
        if args[0] not in own:
            return f"chain has no option {args[0]}"
        if args[0] in ("--install-completion", "--show-completion", "--version", "-h", "--help"):
            return None  # eager: they would act, and take no command
        args.pop(0)
    if not args:
        return None
    name, rest = args[0], args[1:]
    command = group.commands.get(name)
    while isinstance(command, typer.core.TyperGroup) and rest and not rest[0].startswith("-"):  # chain sweep status
        name, rest = rest[0], rest[1:]
        command = command.commands.get(name)
    if isinstance(command, typer.core.TyperGroup) and not rest:
        return None  # a group named alone (chain sweep): its help
    if command is None:
        return f"no command {name!r}"
    try:
        ctx = command.make_context(name, rest)
    except typer.Exit:  # --help
        return None
    except click.exceptions.MissingParameter as exc:
        return None if inline else exc.format_message()
    except click.exceptions.UsageError as exc:
        return exc.format_message()
    if ctx.args:
        return f"unexpected arguments {ctx.args}"
    return None


def test_the_parser_finds_what_rots() -> None:
    assert parse_command(["status", "--watch"]) is None
    assert parse_command(["logs", "--runner", "1"]) is None
    assert parse_command(["--install-completion"]) is None
    assert "--wait" in (parse_command(["status", "--wait"]) or "")
    assert "no command" in (parse_command(["stat"]) or "")
    assert parse_command(["submit", "--max-iter", "5", "stray"])
    assert sn.chain_commands("cd x && MAX_ITER=5 .venv/bin/chain status --json # or --watch") == [["status", "--json"]]
    script = "chain submit --max-iter $N \\\n    --app-cmd 'python3 a.py $X'\ncat <<'E'\nchain nope\nE\n"
    lines = sn.logical_lines(script)
    assert [sn.chain_commands(line) for line in lines] == [
        [["submit", "--max-iter", "1", "--app-cmd", "python3 a.py $X"]],
        [],
    ]


def _all_command_lines() -> list[sn.CommandLine]:
    return sn.command_lines(sn.doc_pages() + sn.example_readmes())


def test_every_command_line_parses() -> None:
    lines = _all_command_lines()
    assert len(lines) > 100
    wrong = [
        f"{c.where}: `chain {shlex.join(c.args)}`: {why}"
        for c in lines
        if (why := parse_command(c.args, inline=c.inline))
    ]
    assert not wrong, "\n".join(wrong)


COMMAND_ONLY = {"--resume", "--new", "--wait", "--reset-excluded"}
COMMAND_VALUED = {"--chain-dir", "--config"}


def _settings_args(args: tuple[str, ...]) -> list[str]:
    """A submit line's settings flags: what ``chain render`` takes of it."""
    out, skip = [], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in COMMAND_ONLY:
            continue
        elif arg in COMMAND_VALUED:
            skip = True
        else:
            out.append(arg)
    return out


def render(args: list[str], cwd: Path) -> tuple[int, str]:
    """``chain render ARGS`` in ``cwd``, in this process, with none of the
    test's own settings in the environment."""
    from typer.testing import CliRunner

    from chain.cli.commands import app
    from chain.core.fields import FIELDS

    names = [spec.env for spec in FIELDS] + ["CHAIN_DIR"]
    clean: dict[str, str | None] = {name: None for name in names if name in os.environ}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, ["render", *args], env=clean)
    finally:
        os.chdir(old)
    return result.exit_code, result.output


RESOURCE_DIRECTIVES = (("--runner-mem", "--mem"), ("--cpus-per-task", "--cpus-per-task"), ("--gpus", "--gpus"))


def _hours(value: str) -> float:
    from chain.core.timefmt import parse_slurm_time

    return parse_slurm_time(value) / 3600


def _submit_lines() -> list[sn.CommandLine]:
    return [c for c in _all_command_lines() if not c.inline and c.args[:1] == ("submit",)]


def test_every_submit_line_renders(tmp_path: Path) -> None:
    """Each ``chain submit`` of a code block, its settings given to ``chain
    render``: the values are valid, and the runner's #SBATCH lines carry the
    resources the line asks for."""
    wrong = []
    for line in _submit_lines():
        args = _settings_args(line.args)
        if "--app-cmd" not in args:
            args += ["--app-cmd", "true"]  # `chain submit --resume ...` keeps its stored command
        code, output = render(args, tmp_path)
        if code != 0:
            wrong.append(f"{line.where}: `{line.text}`: chain render exited {code}: {output.strip()[-300:]}")
            continue
        runner = output.split("# ---- runner.sbatch ----")[1]
        for flag, directive in RESOURCE_DIRECTIVES:
            if flag in args and f"#SBATCH {directive}={args[args.index(flag) + 1]}\n" not in runner:
                wrong.append(f"{line.where}: {flag} is not in the runner's #SBATCH lines:\n{runner}")
    assert not wrong, "\n".join(wrong)


def test_cluster_examples_give_their_runner_memory_and_cpus() -> None:
    """chain's defaults (512M, one CPU) are for trying things: a real training
    is killed by them. A submit line with runners of an hour or more (a
    cluster example) says what its runner gets; one recipe asks for a GPU."""
    bare = []
    for line in _submit_lines():
        args = line.args
        if "--resume" in args or "--runner-time" not in args:
            continue
        if _hours(args[args.index("--runner-time") + 1]) >= 1 and not {"--runner-mem", "--cpus-per-task"} <= set(args):
            bare.append(f"{line.where}: `{line.text}`")
    assert not bare, "cluster examples without --runner-mem and --cpus-per-task:\n" + "\n".join(bare)
    assert any("--gpus" in c.args for c in _submit_lines() if c.where.startswith("docs/recipes.md")), "no GPU recipe"


def test_the_gpu_recipe_shows_what_render_prints(tmp_path: Path) -> None:
    """The recipe's ``#SBATCH`` lines are the runner script ``chain render``
    writes for its command, in the working directory the page names."""
    page = DOCS / "recipes.md"
    blocks = sn.blocks(page)
    index = next(n for n, b in enumerate(blocks) if b.marks[:1] == ("render",))
    command, shown = blocks[index], blocks[index + 1]
    workdir = command.marks[1]
    lines = [c for c in sn.block_commands(command) if c.args[:1] == ("render",)]
    assert len(lines) == 1 and shown.lang == "text", (command, shown)
    code, output = render(list(lines[0].args[1:]), tmp_path)
    assert code == 0, output
    runner = output.split("# ---- runner.sbatch ----")[1].replace(str(tmp_path.resolve()), workdir)
    expected = [line for line in runner.splitlines() if line.startswith("#SBATCH")]
    assert shown.text.splitlines() == expected, "\n".join(expected)
    assert any(line.startswith("#SBATCH --gpus=") for line in expected)
