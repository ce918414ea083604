"""The ``local`` sandbox: the same runner as plain host subprocesses in a temp copy of the workspace.

UNSAFE by design: no isolation, no memory/pid/network limits, code runs as the calling user. It
exists to debug suites and agents on machines without Docker, and is used only when asked for by
name. Deadlines and output caps still hold (the runner kills process groups).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from harness.sandbox import Limits, register
from harness.sandbox import image as _image
from harness.sandbox._pipe import RunnerSandbox, host_flags, jest_hosts
from harness.session.workspace import workspace_files

_LIVE: set[LocalSandbox] = set()  # started by this process and not killed yet (Ctrl-C reaps them)


class LocalSandbox(RunnerSandbox):
    kind = "local"
    image = None

    def __init__(self, limits: Limits):
        self._tmp = Path(tempfile.mkdtemp(prefix="etai-local-"))
        runner = _image.runner_dir()
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
        env.update(dict(limits.env))
        if limits.node_modules:  # a link, as the docker sandbox's read-only mount is not here
            (self._tmp / "ws").mkdir()
            (self._tmp / "ws" / "node_modules").symlink_to(limits.node_modules)
        env.update(
            HOME=str(self._tmp),
            TMPDIR=str(self._tmp / "tmp"),
            ETAI_WORKSPACE=str(self._tmp / "ws"),
            NODE_ENV="test",
            GIT_CONFIG_NOSYSTEM="1",
            ETAI_JEST_HOSTS=str(jest_hosts(limits)),
            **host_flags(),
        )
        if not limits.guard:
            env["ETAI_JEST_GUARD"] = "off"
        proc = subprocess.Popen(
            ["node", str(runner / "runner.js")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._proc = proc
        _LIVE.add(self)
        super().__init__(proc, limits)

    def _kill(self) -> None:
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(self._tmp, ignore_errors=True)
        _LIVE.discard(self)


class LocalRun:
    image = None

    def __init__(self, provider: LocalProvider, limits: Limits):
        self._provider, self.limits = provider, limits

    def start(self, workspace: Path) -> LocalSandbox:
        return self._provider.start(workspace, limits=self.limits)

    def cleanup(self) -> None:
        pass  # nothing prepared: each sandbox removes its own temp folder


class LocalProvider:
    name = "local"
    description = "UNSAFE: host subprocesses in a temp copy (debugging only)"
    safe = False

    def prepare(self, limits: Limits, *, workers: int = 1, image: str | None = None) -> LocalRun:
        return LocalRun(self, limits)

    def start(self, workspace: Path, *, limits: Limits, image: str | None = None) -> LocalSandbox:
        files = workspace_files(workspace)
        return LocalSandbox(limits).init_workspace(files)

    def prune(self, *, all_owners: bool = False) -> list[str]:
        return []  # a local sandbox dies with its process group and its temp folder with close()

    def leftovers(self) -> list[str]:
        return []

    def reap_own(self) -> None:
        for sb in list(_LIVE):
            sb._kill()


register(LocalProvider())
