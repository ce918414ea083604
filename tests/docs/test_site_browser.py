"""The built site in Debian's chromium (headless, over the DevTools protocol): every internal link
followed from the home page, every anchor found, no console error, the search answers; and the same
walk on a copy of the site with one broken link finds it."""

from __future__ import annotations

import shutil
from pathlib import Path

from crawl import search, serve, walk
from headless import browser

# Pages a reader must reach from the home page (a walk that found only the home page would pass
# every link check vacuously).
MUST = ["getting-started/", "threat-model/", "reference/cli/", "reference/api/", "results/speed/"]


def test_every_internal_link_of_the_site_leads_to_a_page_and_anchor(site: Path):
    with serve(site) as base, browser() as tab:
        w = walk(tab, base)
    assert w.problems == []
    reached = {u[len(base) :] for u in w.pages}
    assert set(MUST) <= reached, sorted(reached)
    built = {str(p.parent.relative_to(site)) + "/" for p in site.rglob("index.html")} - {"./"}
    assert built <= reached, f"pages no link leads to: {sorted(built - reached)}"
    assert w.links > 100


def test_search_finds_a_page_by_its_words(site: Path):
    with serve(site) as base, browser() as tab:
        results = search(tab, base, "special_case_rate")
        assert results, "the search showed nothing"
        first = results[0]["link"]
        assert first.startswith(base)
        tab.navigate(first)
        assert "special_case_rate" in tab.eval("document.querySelector('article').textContent")


def test_the_walk_finds_a_broken_link_in_a_copy_of_the_site(site: Path, tmp_path: Path):
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    page = copy / "getting-started" / "index.html"
    html = page.read_text()
    marker = '<article class="md-content__inner md-typeset">'
    assert marker in html
    broken = '<a href="../no-such-page/">a page that is not there</a> <a href="../metrics/#no-such-anchor">x</a>'
    page.write_text(html.replace(marker, marker + broken, 1))
    with serve(copy) as base, browser() as tab:
        w = walk(tab, base)
    assert any(
        "no-such-page/: not a page of the site" in p and "getting-started" in p for p in w.problems
    ), w.problems
    assert any("#no-such-anchor, an anchor that page lacks" in p for p in w.problems), w.problems
