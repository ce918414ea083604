"""The viewer as one HTML page: view.css and view.js beside this file, the index and (in a static
file) every episode's body as JSON inside ``<script type="application/json">`` elements.

A JSON script element is never run, and its text ends only at ``</script``: every ``<``, ``>`` and
``&`` in the JSON is written as a ``\\u`` escape, so no agent text can close it or open markup.
The Content-Security-Policy lets only view.js run (by its hash) and fetch only from the page's own
origin (the server's episode bodies); the page renders agent text through textContent or an
escaping function, never as markup (view.js ``esc``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from reports.view._data import View

_HERE = Path(__file__).parent


def script_json(obj: Any) -> str:
    """JSON safe inside a script element (see module doc)."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(view: View, *, embed_bodies: bool) -> str:
    """The whole page; without ``embed_bodies`` it fetches each body from ``episode/<id>``."""
    js = (_HERE / "view.js").read_text(encoding="utf-8")
    css = (_HERE / "view.css").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
        "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'"
    )
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        "<title>ETAI view</title>",
        f"<style>{css}</style></head><body>",
        '<header><a href="#" id="home">ETAI view</a> <span id="crumb"></span></header>',
        '<main id="app">loading…</main>',
        f'<script type="application/json" id="etai-index">{script_json(view.index_json())}</script>',
    ]
    if embed_bodies:
        parts += [
            f'<script type="application/json" id="ep-{i}">{script_json(b)}</script>'
            for i, b in enumerate(view.bodies)
        ]
    parts.append(f"<script>{js}</script></body></html>\n")
    return "\n".join(parts)


def write(view: View, out: str | Path) -> Path:
    out = Path(out)
    if out.is_dir():
        out = out / "view.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(view, embed_bodies=True), encoding="utf-8")
    return out
