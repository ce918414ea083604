"""What every sandbox shares: a JSON-lines pipe to the in-sandbox runner (recipe/runner/runner.js).

Implementations differ only in how the runner process is started and how a runaway sandbox is
killed; exec, files, Jest and git all travel over the same pipe, so the conformance suite tests
one code path twice.
"""

from __future__ import annotations

import base64
import itertools
import json
import queue
import subprocess
import threading
import time
from typing import Any

from harness.base import speed
from harness.base.errors import SandboxDead, SandboxTimeout
from harness.sandbox import GRACE_S, ExecResult, Limits, Status, ToolFailure


def jest_hosts(limits: Limits) -> int:
    """Warm Jest hosts per sandbox: two when it may use two CPUs, and a run of several test files
    is split between them (Jest's --shard); 5 files, one process, interleaved: 122 -> 97 ms p50."""
    return 2 if limits.cpus >= 2 else 1


def host_flags() -> dict[str, str]:
    """Runner settings taken from the harness's own environment, the same for every sandbox kind:
    the speed paths the runner implements, each on unless turned off (harness/base/speed.py). New
    Jest hosts are forked from a warm one (docs/sandbox.md#forked-hosts) unless ``forked_hosts``
    is off; a runner without its ``fork.node`` starts them whatever this says."""
    return speed.runner_env()


class RunnerSandbox:
    """Base of the registered sandboxes. Subclasses set ``kind``/``image`` and implement ``_kill``."""

    kind = "abstract"
    image: str | None = None

    def __init__(self, proc: subprocess.Popen, limits: Limits):
        """Wait for the runner's hello on ``proc``; if it never comes, ``_kill`` what was started."""
        try:
            self._connect(proc, limits)
        except BaseException:
            self._kill()
            raise

    def _connect(self, proc: subprocess.Popen, limits: Limits) -> None:
        self.limits = limits
        self._proc = proc
        self._ids = itertools.count(1)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._dead: str | None = None
        self._timed_out = False  # why it is dead: its own deadline (a timeout) or anything else
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()
        hello = self._next_line(60.0)
        if not hello.get("ok") or not hello.get("result", {}).get("ready"):
            raise SandboxDead(f"runner did not start: {hello}")

    # ------------------------------------------------------------------ plumbing
    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next_line(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            self._dead = self._dead or "the sandbox runner exited"
            raise (SandboxTimeout if self._timed_out else SandboxDead)(self._dead)
        return json.loads(line)

    def _kill(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def request(
        self, op: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send one request; wait for its answer until the outer deadline, else kill the sandbox."""
        if self._dead:
            raise (SandboxTimeout if self._timed_out else SandboxDead)(self._dead)
        deadline = (timeout if timeout is not None else self.limits.timeout_s) + GRACE_S
        with self._lock:
            rid = next(self._ids)
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(
                    json.dumps({"id": rid, "op": op, **payload}).encode() + b"\n"
                )
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                self._dead = f"the sandbox runner is gone ({e})"
                raise SandboxDead(self._dead) from e
            end = time.monotonic() + deadline
            while True:
                try:
                    answer = self._next_line(max(0.0, end - time.monotonic()))
                except TimeoutError:
                    self._dead = f"{op} did not answer within {deadline:.0f} s; sandbox killed"
                    self._timed_out = True
                    self._kill()
                    raise SandboxTimeout(self._dead) from None
                if answer.get("id") == rid:
                    break
        if not answer.get("ok"):
            if answer.get("tool_error"):
                raise ToolFailure(answer.get("error", "tool error"))
            raise SandboxDead(f"runner failed on {op}: {answer.get('error')}")
        return answer["result"]

    # ------------------------------------------------------------------ the protocol
    def init_workspace(
        self, files: dict[str, str], *, listed: dict[str, list[str]] | None = None
    ) -> RunnerSandbox:
        """Upload the workspace; on any failure the sandbox closes itself. Returns self. ``listed``:
        the test and config files an earlier init of the very same files listed (else Jest lists
        them, loading the workspace's config)."""
        try:
            payload: dict[str, Any] = {"files": files, **self._init_extra(files)}
            if listed:
                payload["listed"] = listed
            r = self.request("init", payload, timeout=60.0)
        except BaseException:
            self.close()
            raise
        self.test_files: list[str] = r.get("test_files") or []
        self.config_files: list[str] = r.get("config_files") or []  # files the Jest config names
        # modules only the tests load that make assertions (runner/test-support.js)
        self.support_files: list[str] = r.get("support_files") or []
        return self

    def _init_extra(self, files: dict[str, str]) -> dict[str, Any]:
        """More of the init request, for a sandbox kind that needs it (Docker: transform tokens)."""
        return {}

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        timeout = timeout if timeout is not None else self.limits.timeout_s
        t0 = time.monotonic()
        try:
            r = self.request(
                "exec",
                {
                    "argv": list(argv),
                    "timeout_ms": int(timeout * 1000),
                    "output_cap": output_cap or self.limits.output_cap,
                    "stdin_b64": base64.b64encode(stdin).decode() if stdin else None,
                },
                timeout=timeout,
            )
        except SandboxDead as e:
            status = Status.TIMEOUT if isinstance(e, SandboxTimeout) else Status.INFRA_ERROR
            return ExecResult(status, -1, "", str(e), False, time.monotonic() - t0)
        return ExecResult(
            status=Status(r["status"]),
            exit_code=r["exit_code"],
            stdout=base64.b64decode(r["stdout"]).decode("utf-8", "replace"),
            stderr=base64.b64decode(r["stderr"]).decode("utf-8", "replace"),
            truncated=r["truncated"],
            duration_s=r["duration_ms"] / 1000,
        )

    def read_file(self, path: str) -> bytes:
        return base64.b64decode(self.request("read", {"path": path})["content_b64"])

    def write_file(self, path: str, data: bytes) -> None:
        self.request("write", {"path": path, "content_b64": base64.b64encode(data).decode()})

    def close(self) -> None:
        self._dead = self._dead or "closed"
        try:
            if self._proc.stdin:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._kill()
        finally:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
