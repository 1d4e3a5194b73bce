"""No function of chain's is a branching a reader must hold in their head:
cyclomatic complexity 15 at most, as radon counts it (ruff's C901, in the
lint, counts fewer branches: a function it passes may be over here)."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

REPO = Path(__file__).resolve().parents[3]
MOST = 15


def _over(path: Path, base: Path = REPO) -> list[str]:
    blocks = cc_visit(path.read_text())
    found = []
    for block in blocks:
        for item in [block, *getattr(block, "methods", [])]:
            if item.complexity > MOST:
                found.append(f"{path.relative_to(base)}:{item.lineno} {item.name} {item.complexity}")
    return found


def test_no_function_is_over_the_complexity_limit() -> None:
    over = [
        line
        for root in ("chain", "hydra_plugins")
        for path in sorted((REPO / root).rglob("*.py"))
        for line in _over(path)
    ]
    assert not over, over


def test_the_count_sees_a_branchy_function(tmp_path: Path) -> None:
    arms = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(MOST + 1))
    (tmp_path / "branchy.py").write_text(f"def f(x):\n{arms}\n    return -1\n")
    assert _over(tmp_path / "branchy.py", tmp_path) == [f"branchy.py:1 f {MOST + 2}"]
