"""Open a page in Debian's chromium, headless, over the Chrome DevTools Protocol: what loaded,
what the console said, and a screenshot. Used by test_render.py; no other test needs a browser."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_IMAGES = """(async () => {
  const imgs = [...document.images];
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  return imgs.map(i => { const r = i.getBoundingClientRect(), s = getComputedStyle(i);
    return {id: i.id, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight,
            shown: r.width > 0 && r.height > 0 && s.display !== 'none' && s.visibility !== 'hidden'}; });
})()"""


@dataclass
class Page:
    title: str
    sections: list[str]
    images: list[dict[str, Any]]
    console_errors: list[str] = field(default_factory=list)
    screenshot: bytes = b""


class _Cdp:
    def __init__(self, url: str):
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=None, open_timeout=30)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(
        self, method: str, session: str | None = None, timeout: float = 60, **params: Any
    ) -> dict[str, Any]:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(
                json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            )


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def open_page(path: Path, *, width: int = 1280, height: int = 1700) -> Page:
    """Load ``path`` in a fresh headless chromium, wait for the load event and every image's decode."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("no chromium: `make browser` installs Debian's")
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        try:
            url = None
            deadline = time.monotonic() + 60
            while url is None and time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line and proc.poll() is not None:
                    break
                m = re.search(r"DevTools listening on (ws://\S+)", line)
                url = m.group(1) if m else None
            if url is None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            cdp = _Cdp(url)
            target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
            s = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                cdp.call(f"{domain}.enable", s)
            cdp.call(
                "Emulation.setDeviceMetricsOverride",
                s,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            cdp.call("Page.navigate", s, url=path.resolve().as_uri())
            cdp.wait_for("Page.loadEventFired")
            images = cdp.call(
                "Runtime.evaluate", s, expression=_IMAGES, awaitPromise=True, returnByValue=True
            )["result"]["value"]
            info = cdp.call(
                "Runtime.evaluate",
                s,
                returnByValue=True,
                expression=(
                    "({title: document.title, sections: [...document.querySelectorAll('section')].map(x => x.id)})"
                ),
            )["result"]["value"]
            shot = base64.b64decode(cdp.call("Page.captureScreenshot", s, format="png")["data"])
            errors = []
            for e in cdp.events:
                p = e.get("params", {})
                if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in (
                    "error",
                    "assert",
                    "warning",
                ):
                    errors.append(
                        " ".join(
                            str(a.get("value", a.get("description"))) for a in p.get("args", [])
                        )
                    )
                elif e.get("method") == "Runtime.exceptionThrown":
                    errors.append(p["exceptionDetails"].get("text", "exception"))
                elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] in (
                    "error",
                    "warning",
                ):
                    errors.append(p["entry"]["text"])
            cdp.ws.close()
            return Page(info["title"], info["sections"], images, errors, shot)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
