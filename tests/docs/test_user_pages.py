"""What a user page may say: no session details, no missing files, no page
left out of the site.

User pages (README.md, docs/ but the development notes and the changelog,
the examples' READMEs) say what holds, not when or at which commit it was
seen: a commit hash, an issue number, a date or a clock window fails here.
Those belong in the results files (``bench/results/``) and the development
notes; the benchmarks page may name its results files, whose names carry
dates. A repository path a page names in code exists, and every page is in
the site's navigation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import snippets as sn
from snippets import DOCS, REPO

HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
ISSUE = re.compile(r"\bissues? ?#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
CLOCK_WINDOW = re.compile(r"\b\d{1,2}:\d\d\b[^.\n]{0,25}\bUTC\b")
RESULTS_FILE = re.compile(r"`?(?:bench/results/)?[\w.*-]+\.(?:md|json|txt)`?|--stem \S+")  # a file, or its stem
DEVELOPERS_PAGES = ("development.md", "changelog.md")


def user_pages() -> list[Path]:
    return [p for p in sn.doc_pages() if p.name not in DEVELOPERS_PAGES] + sn.example_readmes()


def session_details(text: str) -> list[str]:
    """Commit hashes, issue numbers, dates and clock windows of a text."""
    found = []
    for pattern in (HASH, ISSUE, DATE, CLOCK_WINDOW):
        found += [m.group(0) for m in pattern.finditer(text)]
    return found


def test_session_details_are_found() -> None:
    text = "at a486971 (issue 29, #12) on 2026-12-02, 02:07-03:14 UTC; chain-bf27dd, 22.05.8, #SBATCH"
    assert session_details(text) == ["a486971", "issue 29", "#12", "2026-12-02", "02:07-03:14 UTC"]


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_user_pages_carry_no_session_details(page: Path) -> None:
    """A user page says what holds, not when or at which commit it was
    seen: those are in the results files and the development notes. The
    benchmarks page may name its results files (their names carry dates)."""
    text = page.read_text(encoding="utf-8")
    if page.name == "benchmarks.md":
        text = RESULTS_FILE.sub("RESULTS", text)
    found = session_details(text)
    assert not found, f"{page.relative_to(REPO)}: {found}"


REPO_PATH = re.compile(r"`((?:chain|tests|examples|scripts|bench|templates|docs|shared)/[\w./-]*[\w/])`")


@pytest.mark.parametrize("page", [*sn.doc_pages(), *sn.example_readmes()], ids=lambda p: str(p.relative_to(REPO)))
def test_named_repository_files_exist(page: Path) -> None:
    """A path of this repository a page names in code (``tests/app/...``,
    ``bench/results/...``) exists."""
    missing = [
        path
        for path in REPO_PATH.findall(page.read_text(encoding="utf-8"))
        if "*" not in path and not (REPO / path).exists()
    ]
    assert not missing, f"{page.relative_to(REPO)} names files that are not in the repository: {missing}"


def test_every_page_is_in_the_navigation() -> None:
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = {next(iter(item.values())) for item in config["nav"]}
    pages = {p.name for p in DOCS.glob("*.md")} - {"settings-intro.md"}
    assert pages - listed == set(), f"pages missing from mkdocs.yml's nav: {pages - listed}"
    assert config.get("site_url") and config.get("repo_url")
