"""Generated pages of the docs site: Settings and Commands, from the code.

Run by mkdocs-gen-files at every ``mkdocs build`` (``mkdocs.yml``); the
settings page comes from the one settings table (``chain.core.fields.FIELDS``)
and the commands page from the typer app's own help, so neither can drift
from the code. ``tests/docs/test_docs.py`` calls the same functions.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_page() -> str:
    """The Settings page: the hand-written introduction, then one row per setting."""
    from chain.cli.options import _shown_default
    from chain.core.fields import FIELDS

    rows = ["| flag | environment | TOML key | value | default | meaning |", "| --- | --- | --- | --- | --- | --- |"]
    for spec in FIELDS:
        flag = f"`{spec.option}`"
        if spec.metavar == "BOOL":
            off = spec.off_flag or "--no-" + spec.option.removeprefix("--")
            flag += f" / `{off}`"
        value = "on/off" if spec.metavar == "BOOL" else spec.metavar
        rows.append(
            f"| {flag} | `{spec.env}` | `{spec.name}` | {_cell(value)} | "
            f"{_cell(_shown_default(spec))} | {_cell(spec.help)} |"
        )
    intro = (DOCS / "settings-intro.md").read_text(encoding="utf-8")
    return intro.replace("<!-- settings table -->", "\n".join(rows))


def _commands() -> list[tuple[str, object]]:
    import typer.main

    from chain.cli.commands import app

    group = typer.main.get_command(app)
    names = [name for name, cmd in group.commands.items() if not cmd.hidden]  # type: ignore[attr-defined]
    return [(name, group.commands[name]) for name in names]  # type: ignore[attr-defined]


def command_help(name: str | None) -> str:
    """``chain [NAME] --help`` as a user sees it at 100 columns."""
    from typer.testing import CliRunner

    from chain.cli.commands import app

    args = ([name] if name else []) + ["--help"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "100", "NO_COLOR": "1"}, terminal_width=100)
    if result.exit_code != 0:
        raise RuntimeError(f"chain {' '.join(args)} exited {result.exit_code}: {result.output}")
    return result.output


def commands_page() -> str:
    """The Commands page: every command's help."""
    parts = [
        "# Commands",
        "",
        "Generated from `chain --help` and each command's `--help` at build time.",
        "",
        "```text",
        command_help(None).rstrip(),
        "```",
    ]
    for name, _ in _commands():
        parts += ["", f"## chain {name}", "", "```text", command_help(name).rstrip(), "```"]
    return "\n".join(parts) + "\n"


def main() -> None:
    import mkdocs_gen_files

    with mkdocs_gen_files.open("settings.md", "w") as page:
        page.write(settings_page())
    with mkdocs_gen_files.open("commands.md", "w") as page:
        page.write(commands_page())


if __name__ in ("__main__", "<run_path>"):  # mkdocs-gen-files runs it as a script
    main()
