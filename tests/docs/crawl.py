"""Serve a built site on loopback and walk it in headless chromium (tests/reports/headless.py):
every page reached from the home page by its links, every link's target and anchor checked, and
the site's search driven as a reader would. Served over HTTP, not file://: the search runs in a
web worker that fetches its index, which chromium refuses for file:// pages."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urlparse

from headless import Tab


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # a line per request would flood the test's output
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """The folder on http://127.0.0.1:PORT (a free port), for the life of the block."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


_PAGE = """(() => ({
  page: !!document.querySelector('article.md-content__inner'),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
}))()"""


@dataclass
class Walk:
    pages: dict[str, list[str]] = field(default_factory=dict)  # page URL -> the ids on it
    links: int = 0  # internal links followed or checked
    problems: list[str] = field(default_factory=list)


def walk(tab: Tab, base: str) -> Walk:
    """Every internal page reached from base by links; a link to a page that is not one of the
    site's, to a file that does not answer 200, or to an anchor its page lacks is a problem, named
    with the page that links to it. Also a console error on any page."""
    w = Walk()
    queue, seen = [(base, "(start)")], {base}
    anchors: list[tuple[str, str, str]] = []  # (page, fragment, linked from)
    while queue:
        url, origin = queue.pop(0)
        tab.cdp.events.clear()
        tab.navigate(url)
        info = tab.eval(_PAGE)
        if not info["page"]:
            w.problems.append(f"{url}: not a page of the site (linked from {origin})")
            continue
        w.pages[url] = info["ids"]
        w.problems += [f"{url}: console: {e}" for e in tab.console_errors()]
        for href in info["links"]:
            target, frag = urldefrag(href)
            if not target.startswith(base):
                continue  # another site (the theme's credits): not ours to check
            w.links += 1
            if frag:
                anchors.append((target, frag, url))
            if urlparse(target).path.endswith(("/", ".html")):
                if target not in seen:
                    seen.add(target)
                    queue.append((target, url))
            elif (
                status := tab.eval(f"fetch({target!r}, {{method: 'HEAD'}}).then(r => r.status)")
            ) != 200:
                w.problems.append(f"{url}: link to {target} answers {status}")
    for page, frag, origin in anchors:
        if page in w.pages and frag not in w.pages[page]:
            w.problems.append(f"{origin}: link to {page}#{frag}, an anchor that page lacks")
    return w


def search(tab: Tab, base: str, query: str) -> list[dict[str, str]]:
    """Type query into the site's search box and return the results the page shows (title, link)."""
    tab.navigate(base)
    tab.eval(
        f"""(() => {{ const i = document.querySelector('.md-search__input');
        i.focus(); i.value = {query!r};
        i.dispatchEvent(new Event('focus')); i.dispatchEvent(new Event('input', {{bubbles: true}}));
        i.dispatchEvent(new KeyboardEvent('keyup', {{bubbles: true, key: 'a'}})); }})()"""
    )
    tab.wait("document.querySelectorAll('.md-search-result__item').length > 0", timeout=30)
    return tab.eval(
        """[...document.querySelectorAll('.md-search-result__item a')].map(a => ({
             link: a.href, title: (a.querySelector('h1, h2') || a).textContent.trim()}))"""
    )
