"""The layers import downwards only: the core (pure, no I/O) knows nothing of
the store, the backends or the jobs, not even under TYPE_CHECKING; the app
side (``chain.app``, imported in the user's training process) and the rank
wrapper (``chain.launch``, which must leave the user's process to the user)
import none of the engine. Read from each module's import statements."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CHAIN = Path(__file__).resolve().parents[3] / "chain"

# each layer and what it may import of chain besides itself
ALLOWED = {
    "primitives": set[str](),
    "core": {"primitives", "errors"},
    "store": {"core", "primitives", "errors"},
    "app": {"primitives"},
    "launch": set[str](),
}


def imported_layers(source: str) -> set[str]:
    """The layers of chain (``chain.X`` -> ``X``) that ``source`` imports, wherever the import is."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[0] == "chain":
                found.add(parts[1] if len(parts) > 1 else "")
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    wrong = {
        str(path.relative_to(CHAIN.parent)): sorted(found - ALLOWED[layer] - {layer})
        for path in sorted((CHAIN / layer).rglob("*.py"))
        if (found := imported_layers(path.read_text())) - ALLOWED[layer] - {layer}
    }
    assert not wrong, wrong


def test_the_reader_sees_every_form_of_import() -> None:
    source = (
        "import chain.store\nfrom chain.jobs import runner\nfrom . import sibling\nimport chain\n"
        "if TYPE_CHECKING:\n    from chain.backends.base import Backend\n"
    )
    assert imported_layers(source) == {"store", "jobs", "backends", ""}
