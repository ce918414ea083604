"""`etai view RUN --port N`: the viewer from a server on loopback that answers three paths only —
``/`` (the page, its index read afresh from the run folders), ``/episode/<id>`` (one body as JSON)
and nothing else: no file of the run folders or anywhere else is served by its path."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness.base.errors import InputError
from reports.view._data import View, load_view
from reports.view._page import page

_EPISODE = re.compile(r"^/episode/(\d+)$")


def make_server(runs: Sequence[str | Path], host: str, port: int) -> ThreadingHTTPServer:
    """A server for ``runs`` bound to ``host:port`` (port 0: any free one); not yet serving."""
    state: dict[str, View] = {"view": load_view(runs)}  # bad run folders fail here, before binding

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                state["view"] = load_view(runs)  # rows written since the last visit show up
                self._send(200, "text/html; charset=utf-8", page(state["view"], embed_bodies=False))
                return
            m = _EPISODE.match(path)
            bodies = state["view"].bodies
            if m and int(m.group(1)) < len(bodies):
                self._send(
                    200, "application/json", json.dumps(bodies[int(m.group(1))], default=str)
                )
                return
            self._send(404, "text/plain; charset=utf-8", "not found\n")

        def _send(self, code: int, ctype: str, text: str) -> None:
            data = text.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: Any) -> None:
            pass  # a request log on stderr would bury the URL the command printed

    try:
        return ThreadingHTTPServer((host, port), Handler)
    except OSError as e:
        raise InputError(
            f"cannot listen on {host}:{port}: {e.strerror or e}", where="--port"
        ) from None


def serve(runs: Sequence[str | Path], *, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until interrupted (KeyboardInterrupt, raised on); prints the URL first (flushed: a
    script may wait for it)."""
    server = make_server(runs, host, port)
    h, p = server.server_address[:2]
    print(f"etai view: http://{h}:{p}/  (Ctrl-C to stop)", flush=True)
    if host not in ("127.0.0.1", "::1", "localhost"):
        print(f"etai view: listening on {host}, beyond this machine", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt as e:
        # Ctrl-C and SIGTERM (a KeyboardInterrupt, harness/base/interrupts.py) end the server as they
        # end a run: said and exit 130/143 by harness/cli.py, in words fit for a viewer.
        e.left = "the viewer's server stopped; nothing was written"
        raise
    finally:
        server.server_close()
