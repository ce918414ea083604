"""`mkdocs build --strict` (what `make docs` runs) builds the site, and fails on a copy of it with a
link to a missing page, to a missing anchor, or to a repository file that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import mkdocs_build, project_copy


def test_the_site_builds_strictly_with_every_page_of_the_nav(site: Path):
    for page in ("index.html", "getting-started/index.html", "reference/cli/index.html"):
        assert (site / page).is_file(), page
    api = (site / "reference" / "api" / "index.html").read_text()
    assert 'id="harness.runs.runner.run"' in api and 'id="reports._gate.gate"' in api
    assert (site / "search" / "search_index.json").stat().st_size > 100_000


@pytest.mark.parametrize(
    "link, said",
    [
        ("[a page](no-such-page.md)", "no-such-page.md"),
        ("[an anchor](metrics.md#no-such-anchor)", "no-such-anchor"),
        ("[a file](../harness/no_such_module.py)", "not a file of the repository"),
    ],
)
def test_a_broken_link_fails_the_strict_build(tmp_path: Path, link: str, said: str):
    project = project_copy(tmp_path / "project")
    page = project / "docs" / "getting-started.md"
    page.write_text(page.read_text() + f"\nSee {link}.\n")
    p = mkdocs_build(project, tmp_path / "out")
    assert p.returncode != 0
    assert said in p.stderr + p.stdout
    assert "getting-started.md" in p.stderr + p.stdout


def test_the_copy_builds_when_nothing_is_broken(tmp_path: Path):
    """The copy the test above breaks builds as it is: the failure is the link's, not the copy's."""
    p = mkdocs_build(project_copy(tmp_path / "project"), tmp_path / "out")
    assert p.returncode == 0, p.stderr[-3000:]
