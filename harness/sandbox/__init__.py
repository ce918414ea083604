"""One Sandbox protocol, a registry of implementations, and the status taxonomy.

``docker`` (default) runs everything in a hardened container; ``local`` runs the same in-sandbox
runner as plain host subprocesses in a temp copy of the workspace. ``local`` is NOT isolation:
it exists to debug on machines without Docker and must be asked for by name.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.base.errors import InfraError, InputError
from harness.base.registry import Registry
from harness.session.records import Status  # the one status enum, re-exported for backends

GRACE_S = 5.0  # outer deadline = inner deadline + this; past it the whole sandbox is killed


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (docs/sandbox.md#hardening-profile)."""

    memory_mb: int = 1024
    cpus: float = 2.0  # Jest runs 20-40% slower under a 1-CPU quota here (GC and compile threads)
    pids: int = 256
    nofile: int = 1024
    scratch_mb: int = 256
    timeout_s: float = 30.0  # default deadline of one exec or Jest run
    output_cap: int = 1 << 20  # bytes kept of stdout+stderr per exec
    guard: bool = (
        True  # grading integrity in the Jest hosts; off only for benchmarks that measure its cost
    )
    # What a suite declares for every sandbox of its run (suite.yaml's `sandbox:`; #16): extra
    # environment variables (checked against SUITE_ENV_REFUSED when the suite loads) and a host
    # folder given read-only at <workspace>/node_modules (installed from the project's lockfile).
    env: tuple[tuple[str, str], ...] = ()
    node_modules: str | None = None
    # The trusted transform cache (harness/sandbox/transforms.py): Docker Jest sandboxes read it.
    transform_cache: bool = True


def jest_heap_mb(memory_mb: int) -> int:
    """A Jest host's V8 heap limit (``--max-old-space-size``): 60% of the sandbox's memory, so that
    a test that grows without end fails as a heap overflow, not as a killed container. The image's
    code cache is made for the limits of 1024 and 2048 MB (image/recipe/Dockerfile)."""
    return max(128, int(memory_mb * 0.6))


# Variables a suite may not set: they would reach the root runner (preloads, library and module
# search paths, where HOME and the workspace are) or the harness's own settings (ETAI_*).
SUITE_ENV_REFUSED = ("NODE_OPTIONS", "NODE_PATH", "PATH", "HOME", "TMPDIR", "LD_", "ETAI_", "GIT_")


@dataclass(frozen=True)
class ExecResult:
    status: Status
    exit_code: int
    stdout: str
    stderr: str
    truncated: bool
    duration_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncated": self.truncated,
            "duration_s": round(self.duration_s, 4),
        }


class Sandbox(Protocol):
    """A started sandbox holding one workspace. Paths are relative to the workspace root."""

    kind: str
    image: str | None  # what results name as the environment (image tag, or None for local)
    limits: Limits
    test_files: list[str]  # the Jest test files of the pristine workspace, listed at start
    config_files: list[
        str
    ]  # workspace files the Jest config names (setup files, environments, ...)
    support_files: list[str]  # modules only the tests load that make assertions (test helpers)

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def request(
        self, op: str, payload: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """One call to the in-sandbox runner (Jest, file tools, git). Raises ToolFailure on a tool error."""
        ...

    def close(self) -> None: ...


class ToolFailure(Exception):
    """The runner refused a request (bad path, missing file, ...): a result for the agent, not a crash."""


class Prepared(Protocol):
    """A backend made ready for one run: starts sandboxes until ``cleanup``."""

    image: str | None  # what results name as the environment

    def start(self, workspace: Path) -> Sandbox:
        """A fresh sandbox holding a copy of ``workspace``; the caller must ``close()`` it."""
        ...

    def cleanup(self) -> None:
        """Release what ``prepare`` made (warm pools); every sandbox it started is closed by then."""
        ...


class Provider(Protocol):
    """A sandbox backend and its life cycle, in the spirit of inspect_ai's sandbox environments:
    ``prepare`` once per run (image, leftovers of dead runs, warm pool) -> ``start`` per job -> the
    sandbox's ``close`` -> ``cleanup`` once. Timeouts and dead sandboxes are the typed errors of
    harness.base.errors (SandboxTimeout, SandboxDead), never told apart by their text. Nothing outside
    this package touches a backend's machinery (Docker, processes) but through a Provider."""

    name: str
    description: str
    safe: bool  # False: not isolation (``local``); used only when asked for by name

    def prepare(
        self, limits: Limits, *, workers: int = 1, image: str | None = None
    ) -> Prepared: ...

    def start(self, workspace: Path, *, limits: Limits, image: str | None = None) -> Sandbox:
        """One sandbox without a prepared run (tools, tests, recording)."""
        ...

    def prune(self, *, all_owners: bool = False) -> list[str]:
        """Remove what runs that died left behind (or everything of ETAI's); return the names."""
        ...

    def leftovers(self) -> list[str]:
        """Names of the sandboxes of every process that still exist."""
        ...

    def reap_own(self) -> None:
        """Kill this process's sandboxes now (Ctrl-C): running episodes then end fast."""
        ...


@runtime_checkable
class PipedProvider(Provider, Protocol):
    """A backend that also runs a driver other than the Jest runner on a pipe, in the same
    container profile: HumanEval's Python driver (suites/humaneval/_box.py). Optional: a backend
    without it serves every session suite; ``piped_provider`` names what is missing."""

    def piped(
        self,
        image: str,
        limits: Limits,
        argv: list[str],
        *,
        run_id: str | None = None,
        name_prefix: str = "etai",
        trusted_root: bool = True,
    ) -> tuple[str, subprocess.Popen]:
        """A sandbox with ``argv`` running on its stdin/stdout: (its name, the pipe's process)."""
        ...

    def kill_and_remove(self, name: str) -> None:
        """End the sandbox ``piped`` named ``name`` and remove what it left."""
        ...


# Plug-ins: entry-point group etai.sandboxes, each a Provider. `etai sandbox check NAME` runs the
# conformance checks (harness/tools/conformance.py) against any of them.
SANDBOXES: Registry[Provider] = Registry(
    "sandbox",
    group="etai.sandboxes",
    builtins=("harness.sandbox._docker", "harness.sandbox._local"),
    where="--sandbox",
)


def register(provider: Provider) -> Provider:
    return SANDBOXES.register(
        provider.name, provider, description=provider.description, safe=provider.safe
    )


def names() -> list[str]:
    return list(SANDBOXES.names())


def provider(kind: str) -> Provider:
    """The registered backend ``kind``; InputError naming --sandbox otherwise (checked before a run)."""
    return SANDBOXES.get(kind)


def piped_provider(kind: str) -> PipedProvider:
    """The registered backend ``kind`` if it runs drivers on a pipe; InputError naming --sandbox
    otherwise."""
    found = SANDBOXES.get(kind)
    if not isinstance(found, PipedProvider):
        raise InputError(f"sandbox {kind!r} cannot run a driver on a pipe", where="--sandbox")
    return found


def require_kind(kind: str) -> None:
    """InputError unless ``kind`` is a registered sandbox (a run checks this before anything starts)."""
    SANDBOXES.get(kind)


def start(
    kind: str, workspace: Path | str, *, limits: Limits | None = None, image: str | None = None
) -> Sandbox:
    """Start a sandbox of ``kind`` with a copy of ``workspace``; the caller must ``close()`` it."""
    return SANDBOXES.get(kind).start(Path(workspace), limits=limits or Limits(), image=image)


def reap_own() -> None:
    """Kill this process's sandboxes of every backend it used (Ctrl-C)."""
    for _, p in SANDBOXES.loaded():
        p.reap_own()


def close_quietly(sb: Sandbox) -> None:
    """Close a sandbox whose outcome is already known. An engine gone by now is not that outcome's
    failure: the container keeps its labels and the next run's prune removes it."""

    try:
        sb.close()
    except InfraError:
        pass


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
