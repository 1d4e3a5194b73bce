"""Where chain's files for the app live (``chain.primitives.paths``)."""

from __future__ import annotations

from pathlib import Path

from chain.primitives.paths import shell_helpers_dir


def test_the_shell_helpers_are_shipped_inside_the_package() -> None:
    shipped = shell_helpers_dir({})
    assert shipped == Path(__file__).resolve().parents[3] / "chain" / "shell"
    assert (shipped / "chain.sh").is_file() and (shipped / "chain.R").is_file()


def test_chain_shell_helpers_names_another_place(tmp_path: Path) -> None:
    assert shell_helpers_dir({"CHAIN_SHELL_HELPERS": str(tmp_path)}) == tmp_path
    assert shell_helpers_dir({"CHAIN_SHELL_HELPERS": ""}) == shell_helpers_dir({})  # empty: not set
