"""Open a page in Debian's chromium, headless, over the Chrome DevTools Protocol: what loaded,
what the console said, and a screenshot (``open_page``, test_render.py), or drive it step by step
(``browser``: test_view.py clicks through the viewer; bench/view_bench.py times it)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
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


class Tab:
    """One page of a running headless chromium, driven over CDP (see ``browser``)."""

    def __init__(self, cdp: _Cdp, session: str):
        self.cdp, self.s = cdp, session

    def navigate(self, url: str) -> None:
        self.cdp.events = [e for e in self.cdp.events if e.get("method") != "Page.loadEventFired"]
        self.cdp.call("Page.navigate", self.s, url=url)
        self.cdp.wait_for("Page.loadEventFired")

    def eval(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JS expression (a promise is awaited); a JS exception raises here."""
        reply = self.cdp.call(
            "Runtime.evaluate",
            self.s,
            timeout=timeout,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:80]}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait(self, condition: str, timeout: float = 30) -> None:
        """Poll a JS condition until it holds."""
        deadline = time.monotonic() + timeout
        while not self.eval(f"!!({condition})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {condition}")
            time.sleep(0.05)

    def screenshot(self) -> bytes:
        return base64.b64decode(
            self.cdp.call("Page.captureScreenshot", self.s, format="png")["data"]
        )

    def console_errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors so far."""
        errors = []
        for e in self.cdp.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in (
                "error",
                "assert",
                "warning",
            ):
                errors.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
                )
            elif e.get("method") == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"].get("text", "exception"))
            elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] in (
                "error",
                "warning",
            ):
                errors.append(p["entry"]["text"])
        return errors


@contextlib.contextmanager
def browser(*, width: int = 1280, height: int = 1700) -> Iterator[Tab]:
    """A fresh headless chromium with one blank tab; the whole browser is gone on exit."""
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
            # Its own group: chromium's helpers (zygote, renderer, crashpad) outlive the main
            # process and keep writing into the profile, so the profile is removed only after
            # the whole group is gone (a CI run failed on "Directory not empty: 'Default'").
            start_new_session=True,
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
            try:
                yield Tab(cdp, s)
            finally:
                cdp.ws.close()
        finally:
            _end_group(proc)


def open_page(path: Path, *, width: int = 1280, height: int = 1700) -> Page:
    """Load ``path`` in a fresh headless chromium, wait for the load event and every image's decode."""
    with browser(width=width, height=height) as tab:
        tab.navigate(path.resolve().as_uri())
        images = tab.eval(_IMAGES)
        info = tab.eval(
            "({title: document.title, sections: [...document.querySelectorAll('section')].map(x => x.id)})"
        )
        shot = tab.screenshot()
        return Page(info["title"], info["sections"], images, tab.console_errors(), shot)


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM the browser's process group, SIGKILL what is left after 10 s, and return only
    when no process of the group remains."""
    pgid = proc.pid  # start_new_session: the group id is the leader's pid
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _live_members(pgid):
                return
            time.sleep(0.05)
    proc.wait()


def _live_members(pgid: int) -> list[int]:
    """Pids of the group that are not zombies (a zombie writes nothing; whether one is reaped
    depends on the machine's pid 1, so `killpg(pgid, 0)` alone could wait for nothing)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            # after the command's closing parenthesis: state, ppid, pgrp
            state, _ppid, pgrp = (d / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            pids.append(int(d.name))
    return pids
