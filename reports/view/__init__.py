"""`etai view`: episode transcripts of run folders, as one static HTML file or from a loopback server.

    v = reports.view.load_view(["runs/a", "runs/b"])   # the index and every episode's body
    reports.view.write(v, "view.html")                 # self-contained: no network, no CDN
    reports.view.serve(["runs/a"], port=8000)          # http://127.0.0.1:8000/, the given runs only

The page (view.js) lists episodes with filters and sorting, shows one episode (instruction, IDE
context, each step's call and result, human vs agent path, cursor vs target, the verdict and the
check that fired) and one session with every agent side by side.
"""

from __future__ import annotations

from reports.view._data import View, load_view
from reports.view._page import page, write
from reports.view._server import serve

__all__ = ["View", "load_view", "page", "serve", "write"]
