"""The README became a front page and its long sections pages of the site: no table row of the
README as it was before (commit 2b6afb3) is lost, and the front page keeps its first commands."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "2b6afb3"  # the last README with every section in it


@pytest.fixture(scope="module")
def old_readme() -> str:
    p = subprocess.run(
        ["git", "show", f"{BEFORE}:README.md"], cwd=ROOT, capture_output=True, text=True
    )
    if p.returncode != 0:
        pytest.fail(
            f"git show {BEFORE}:README.md: {p.stderr.strip()} (a clone with history needed)"
        )
    return p.stdout


def normal(text: str) -> str:
    """What moving a row onto a page may change: issue numbers dropped (the site names concepts,
    not this repository's issues), links pointed at the site's pages, spacing, and a pipe in code
    in a table unescaped (Python-Markdown splits no cell inside backticks and would show `\\|`)."""
    text = text.replace("\\|", "|")
    text = re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", text)
    text = re.sub(r"\s*\(#\d+\)", "", text)
    text = re.sub(r"\(#\d+[;,]\s*", "(", text)
    return re.sub(r"\s+", " ", text).strip()


def rows(markdown: str) -> list[str]:
    """Every row of every table, separator rows left out."""
    found = []
    for line in markdown.splitlines():
        line = line.strip()
        if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|", line):
            found.append(line)
    return found


def test_every_table_row_of_the_old_readme_is_on_a_page_of_the_site(old_readme: str):
    site = normal("\n".join(p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))))
    old = rows(old_readme)
    assert len(old) > 200  # the extraction found the tables (a parse that finds none passes all)
    missing = [r for r in old if normal(r) not in site]
    assert missing == []


def test_the_check_sees_a_row_that_is_gone(old_readme: str):
    docs = "\n".join(p.read_text() for p in sorted((ROOT / "docs").rglob("*.md")))
    row = next(r for r in rows(old_readme) if "fastest-validator (30)" in r)
    assert normal(row) in normal(docs)
    assert normal(row) not in normal(docs.replace(row.split("|")[2].strip(), "?"))


def test_the_readme_is_a_front_page_with_the_first_commands_first(old_readme: str):
    readme = (ROOT / "README.md").read_text()
    assert readme.splitlines(keepends=True)[:4] == old_readme.splitlines(keepends=True)[:4]
    assert "make demo" in readme.splitlines()[2] and "make test" in readme.splitlines()[3]
    assert len(readme.splitlines()) <= 200
