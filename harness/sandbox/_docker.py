"""The Docker sandbox: one hardened container per workspace, a warm runner inside, a pool to hide start-up.

Every container gets the whole profile of docs/sandbox.md#hardening-profile. Deadlines are enforced
from outside (``docker kill`` by name when the runner misses its outer deadline), every container
is removed in ``close()`` (also on Ctrl-C: the CLI's handler and ``atexit`` reap this process's
label), and ``prune()`` removes leftovers of dead processes at start-up.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from harness.base import speed
from harness.base.errors import InfraError
from harness.sandbox import (
    Limits,
    close_quietly,
    jest_heap_mb,
    process_alive,
    register,
    transforms,
)
from harness.sandbox import image as _image
from harness.sandbox._pipe import RunnerSandbox, host_flags, jest_hosts
from harness.session.workspace import workspace_files

LABEL = "etai"
UID = "10001:10001"
NO_IPC = {
    "kernel.shmmni": "0",
    "kernel.msgmni": "0",
    "kernel.sem": "0 0 0 0",
    "fs.mqueue.queues_max": "0",
}
REUSES = 50  # episodes one container may hold in turn before the pool removes it
_LIVE: set[str] = set()  # containers this process created (or is creating) and has not removed
# Bumped by every reap: a container whose creation a reap overlapped is removed as it comes up
# (the engine may create it after the reap's removal of its name answered "not found").
_REAPS = [0]
_client = None
_client_lock = threading.Lock()


def client():
    global _client
    with _client_lock:
        if _client is None:
            _client = _image.docker_client(timeout=60)
        return _client


def _engine_errors() -> tuple[type[Exception], ...]:
    """What the SDK raises when the engine itself is gone or stops answering mid-call (requests'
    connection errors are not docker.errors types)."""
    # the docker SDK and its requests: imported by what starts containers, not by `import harness`
    import docker.errors
    import requests.exceptions

    return docker.errors.DockerException, requests.exceptions.RequestException


def _no_engine(what: str, e: Exception) -> InfraError:
    return InfraError(f"{what}: the Docker engine did not answer ({type(e).__name__}: {e})")


def _labels(run_id: str | None) -> dict[str, str]:
    return {
        LABEL: "1",
        f"{LABEL}.owner_pid": str(os.getpid()),
        f"{LABEL}.host": socket.gethostname(),
        f"{LABEL}.started_at": str(int(time.time())),
        f"{LABEL}.run_id": run_id or "",
    }


def transform_store(limits: Limits) -> bool:
    """Whether a Jest sandbox reads the trusted transform store: the suite's setting and the
    ``transform_store`` speed path (harness/base/speed.py)."""
    return limits.transform_cache and speed.on("transform_store")


def create_container(
    image: str,
    limits: Limits,
    *,
    run_id: str | None = None,
    name_prefix: str = "etai",
    trusted_root: bool = True,
):
    """Start a detached container with the full hardened profile; return (container, name).

    With ``trusted_root`` (the Jest sandbox), the in-sandbox runner is exec'd as root holding only
    SETUID, SETGID and KILL, owns the workspace, and runs tests and commands as the sandbox user, to
    whom the workspace is then read-only. Without it (HumanEval's driver) every process is the
    sandbox user, who owns the scratch space.
    """
    # docker SDK: imported by what starts containers, not by `import harness`
    import docker.errors
    from docker.types import LogConfig, Mount, Ulimit

    name = f"{name_prefix}-{uuid.uuid4().hex[:12]}"
    owner = "uid=0,gid=0,mode=0755" if trusted_root else "uid=10001,gid=10001,mode=0700"
    scratch = f"rw,nosuid,nodev,noexec,size={limits.scratch_mb}m,{owner}"
    env = {
        "HOME": "/scratch",
        "TMPDIR": "/scratch/tmp",
        "ETAI_WORKSPACE": "/scratch/ws",
        "ETAI_JEST_HEAP_MB": str(jest_heap_mb(limits.memory_mb)),
        "ETAI_JEST_HOSTS": str(jest_hosts(limits)),
    }
    if trusted_root:
        env["ETAI_SANDBOX_UID"] = "10001"
    if not limits.guard:
        env["ETAI_JEST_GUARD"] = "off"
    env.update(host_flags())
    # The suite's variables go under ours: a name the loader let through never replaces one above.
    env = {**dict(limits.env), **env}
    mounts = []
    if limits.node_modules:  # the project's dependencies, read-only, where Node looks for them
        mounts.append(
            Mount("/scratch/ws/node_modules", limits.node_modules, type="bind", read_only=True)
        )
        env["ETAI_DEPS_READONLY"] = "1"  # the guard trusts them as it trusts Jest's own
    if trusted_root and transform_store(limits):  # transformed code that only trusted runs wrote
        mounts.append(Mount(transforms.MOUNT, str(transforms.store()), type="bind", read_only=True))
        env["ETAI_TRANSFORM_STORE"] = transforms.MOUNT
    # Named before the engine hears of it, so a reap (Ctrl-C, SIGTERM, exit) that comes while it
    # is being created removes it too.
    reaps = _REAPS[0]
    _LIVE.add(name)
    try:
        c = client().containers.run(
            image,
            ["sleep", "infinity"],
            name=name,
            labels=_labels(run_id),
            detach=True,
            init=True,
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            cap_add=["SETUID", "SETGID", "KILL"] if trusted_root else [],
            user="0:0" if trusted_root else UID,
            read_only=True,
            tmpfs={"/scratch": scratch},
            mounts=mounts,
            ipc_mode="none",
            # No System V or POSIX IPC objects at all: they would outlive every process of an
            # episode in the container's IPC namespace (python3 reaches them through ctypes), and
            # a container the pool reuses must hold nothing of the last one.
            sysctls=NO_IPC,
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9),
            ulimits=[Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile)],
            log_config=LogConfig(type="none"),
            working_dir="/scratch",
            # Environment is an allowlist: nothing of the host's (secrets included) goes in.
            environment=env,
        )
    except docker.errors.ImageNotFound as e:
        _LIVE.discard(name)
        raise InfraError(f"sandbox image {image} is missing; run `etai image build`") from e
    except docker.errors.APIError as e:
        kill_and_remove(name)  # a container that was created but failed to start
        raise InfraError(f"docker could not start a sandbox: {e.explanation or e}") from e
    except _engine_errors() as e:  # if it was created all the same, the next run's prune removes it
        raise _no_engine("could not start a sandbox", e) from e
    if _REAPS[0] != reaps:  # this process is stopping its sandboxes: this one too
        kill_and_remove(name)
        raise InfraError("sandboxes are being stopped (interrupted); this one was removed")
    return c, name


def kill_and_remove(name: str) -> None:
    # docker SDK: imported by what starts containers, not by `import harness`
    import docker.errors

    try:
        client().api.remove_container(name, force=True)  # force = SIGKILL then remove
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise InfraError(f"could not remove container {name}: {e}") from e
    except _engine_errors() as e:  # still labelled: the next run's prune removes it
        raise _no_engine(f"could not remove container {name}", e) from e
    _LIVE.discard(name)


RUNNER = ["node", "/opt/etai/runner.js"]


class DockerSandbox(RunnerSandbox):
    kind = "docker"
    _pool: Pool | None = None  # set while a pool's episode holds it: close() then offers it back
    uses = 1  # episodes this container has held, this one included
    kept_hosts = 0  # Jest hosts the last reset kept (they had run nothing but the template)
    _handed_on = False  # the next episode holds this container and runner now

    def __init__(self, image: str, limits: Limits, *, run_id: str | None = None):
        self.image = image
        self.name, proc = piped(image, limits, RUNNER, run_id=run_id)
        super().__init__(proc, limits)

    def _init_extra(self, files: dict[str, str]) -> dict[str, Any]:
        # Each file's token for the transform store: the runner hands them to its Jest hosts over
        # their requests, never in the environment or a file the sandbox user can read.
        if not transform_store(self.limits):
            return {}
        limits = self.limits
        scope = transforms.scope(self.image, limits.node_modules, limits.env)
        return {"transform_keys": transforms.file_keys(files, scope)}

    def close(self) -> None:
        if self._handed_on:
            return
        pool, self._pool = self._pool, None
        if pool is None:
            super().close()
        else:
            pool.give_back(self)

    def handed_on(self, kept_hosts: int) -> DockerSandbox:
        """The same container and runner as a new sandbox for the next episode (after the runner's
        ``reset``); this one then reads as closed, and closing it does nothing."""
        nxt = object.__new__(DockerSandbox)
        nxt.__dict__.update(self.__dict__)
        nxt.uses, nxt.kept_hosts = self.uses + 1, kept_hosts
        self._dead, self._handed_on = "closed", True
        return nxt

    def archive(self, folder: str) -> bytes | None:
        """A tar of ``folder`` in the container, or None (the sandbox is gone, or it is not there).
        Made by `tar` in the container: the engine's archive API does not see the /scratch tmpfs."""
        try:
            code, (data, _) = (
                client()
                .containers.get(self.name)
                .exec_run(["tar", "-C", folder, "-cf", "-", "."], user="0:0", demux=True)
            )
        except Exception:  # a sandbox that died or was removed: nothing to take
            return None
        return data if code == 0 else None

    def _kill(self) -> None:
        kill_and_remove(self.name)


@atexit.register
def _reap_own() -> None:
    _REAPS[0] += 1
    for name in list(_LIVE):
        try:
            kill_and_remove(name)
        except Exception:
            pass


class Pool:
    """Pre-started containers (runner loaded, Jest warming) so that ``acquire`` costs only the upload.

    A container whose episode ended cleanly comes back (``give_back``) and its runner resets it:
    every process of that episode ended, the scratch space emptied, Jest hosts kept only if no
    workspace code ran (runner.js ``resetContainer``): ready again for a fraction of a new
    container's cost. At most twice ``size`` containers exist at once, those out with
    episodes included."""

    def __init__(self, image: str, limits: Limits, size: int = 2, run_id: str | None = None):
        self.image, self.limits, self.size, self.run_id = image, limits, size, run_id
        self._ready: list[DockerSandbox] = []
        self._cv = threading.Condition()
        self._closed = False
        self._starting = 0  # new containers and resets under way
        self._out = 0  # handed to episodes and not given back yet
        self._listed: dict[str, dict[str, list[str]]] = {}  # workspace digest -> what init listed
        self._threads: list[threading.Thread] = []
        self._fill()

    def _spawn(self, target) -> None:
        t = threading.Thread(target=target, daemon=True)
        self._threads.append(t)
        t.start()

    def _fill(self) -> None:
        with self._cv:
            total = len(self._ready) + self._starting + self._out
            need = max(0, min(self.size - len(self._ready) - self._starting, 2 * self.size - total))
            self._starting += need
        for _ in range(need):
            self._spawn(self._start_one)

    def _start_one(self) -> None:
        try:
            sb = DockerSandbox(self.image, self.limits, run_id=self.run_id)
        except Exception:
            sb = None
        self._add(sb)

    def _add(self, sb: DockerSandbox | None) -> None:
        with self._cv:
            self._starting -= 1
            if sb is not None and not self._closed:
                self._ready.append(sb)
                self._cv.notify()
                return
            # Every acquirer waiting on the starts re-checks: once none is under way, each makes
            # its own at once (one woken per failed start left the rest asleep for acquire's 60 s).
            self._cv.notify_all()
        if sb is not None:
            close_quietly(sb)

    def acquire(self, workspace: Path) -> DockerSandbox:
        files = workspace_files(workspace)
        with self._cv:
            # A start or reset under way is ready sooner than a container made now.
            self._cv.wait_for(lambda: self._ready or not self._starting, timeout=60)
            sb = self._ready.pop() if self._ready else None
            self._out += 1
        try:
            if sb is None:
                sb = DockerSandbox(self.image, self.limits, run_id=self.run_id)
        except BaseException:
            with self._cv:
                self._out -= 1
            raise
        sb._pool = self
        self._fill()
        # Episodes of one session start from the same files: the test files and config files an
        # earlier init listed for them are passed on, and the runner then loads no workspace code
        # before the agent acts (a no-op episode leaves its warm Jest hosts reusable; #15).
        key = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        sb.init_workspace(files, listed=self._listed.get(key))
        if sb.test_files:
            self._listed[key] = {
                "test_files": sb.test_files,
                "config_files": sb.config_files,
                "support_files": sb.support_files,
            }
        return sb

    def give_back(self, used: DockerSandbox) -> None:
        """``used``'s episode is over: its runner resets the container for the next episode, or it
        is removed (its runner dead or timed out, ``REUSES`` episodes held, or the pool closed)."""
        with self._cv:
            self._out -= 1
            keep = (
                not used._dead
                and not self._closed
                and used.uses < REUSES
                and speed.on("container_reuse")
            )
            if keep:
                self._starting += 1
        if not keep:
            try:
                RunnerSandbox.close(used)
            finally:
                self._fill()
            return

        def reset() -> None:
            sb = None
            try:
                done = used.request("reset", {}, timeout=30)
                sb = used.handed_on(int(done.get("kept_hosts", 0)))
            except Exception:  # not reset: removed, never reused
                close_quietly(used)
            self._add(sb)
            if sb is None:
                self._fill()

        self._spawn(reset)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            ready, self._ready = self._ready, []
            self._cv.notify_all()
        for sb in ready:
            close_quietly(sb)
        for t in self._threads:  # a start still in flight must not outlive us untracked
            t.join(timeout=60)


def piped(
    image: str,
    limits: Limits,
    argv: list[str],
    *,
    run_id: str | None = None,
    name_prefix: str = "etai",
    trusted_root: bool = True,
) -> tuple[str, subprocess.Popen]:
    """A hardened container with ``argv`` running in it on a pipe (stdin/stdout): (name, process).
    The caller removes it with ``kill_and_remove(name)``. For drivers other than the Jest runner
    (HumanEval's Python driver): the container profile stays the same for every one of them."""
    _, name = create_container(
        image, limits, run_id=run_id, name_prefix=name_prefix, trusted_root=trusted_root
    )
    try:
        # A long-lived `docker exec -i` is the pipe. The SDK's attach socket would need hand
        # demultiplexing of Docker's stream frames; the CLI does exactly that, over the same API.
        proc = subprocess.Popen(
            ["docker", "exec", "-i", *(["-u", "0:0"] if trusted_root else []), name, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches us, not the pipe; close() ends it
        )
    except BaseException:
        kill_and_remove(name)
        raise
    return name, proc


class DockerRun:
    """The Docker backend prepared for one run: the image, and a warm pool made on first use."""

    def __init__(self, image: str, limits: Limits, pool_size: int):
        self.image, self.limits, self._size = image, limits, pool_size
        self._pool: Pool | None = None
        self._lock = threading.Lock()

    def start(self, workspace: Path) -> DockerSandbox:
        with self._lock:
            if self._pool is None:
                self._pool = Pool(self.image, self.limits, size=self._size)
        return self._pool.acquire(workspace)

    def cleanup(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


class DockerProvider:
    name = "docker"
    description = "hardened Docker container (default)"
    safe = True

    def prepare(self, limits: Limits, *, workers: int = 1, image: str | None = None) -> DockerRun:
        image = image or _image.ensure_image()
        prune()  # containers of runs that died (SIGKILL, reboot) before they could clean up
        return DockerRun(image, limits, pool_size=min(workers, 4))

    def start(self, workspace: Path, *, limits: Limits, image: str | None = None) -> DockerSandbox:
        files = workspace_files(workspace)
        return DockerSandbox(image or _image.ensure_image(), limits).init_workspace(files)

    def prune(self, *, all_owners: bool = False) -> list[str]:
        return prune(all_owners=all_owners)

    def leftovers(self) -> list[str]:
        return leftovers()

    def reap_own(self) -> None:
        _reap_own()

    piped = staticmethod(piped)
    kill_and_remove = staticmethod(kill_and_remove)


def prune(*, all_owners: bool = False) -> list[str]:
    """Remove labelled containers whose owning process is gone (or every labelled one)."""
    removed = []
    host = socket.gethostname()
    for name, labels in labelled():
        pid = int(labels.get(f"{LABEL}.owner_pid", "0") or 0)
        mine_alive = labels.get(f"{LABEL}.host") == host and pid > 0 and process_alive(pid)
        if all_owners or not mine_alive:
            kill_and_remove(name)  # one another process removed meanwhile is not an error
            removed.append(name)
    return removed


def leftovers(owner_pid: int | None = None) -> list[str]:
    """Names of labelled containers (only those of the process ``owner_pid`` if given)."""
    return [name for name, _ in labelled(owner_pid)]


def labelled(owner_pid: int | None = None) -> list[tuple[str, dict[str, str]]]:
    """(name, labels) of every labelled container, from one listing call.

    The SDK's ``containers.list`` inspects each listed container in a second call, so a container
    that another ETAI process removes in between raised ``NotFound`` mid-listing (a real run once
    crashed with it). The engine's own list answer already holds names and labels."""
    label = [LABEL] if owner_pid is None else [LABEL, f"{LABEL}.owner_pid={owner_pid}"]
    try:
        found = client().api.containers(all=True, filters={"label": label})
    except _engine_errors() as e:
        raise _no_engine("could not list sandboxes", e) from e
    return [(c["Names"][0].lstrip("/"), c.get("Labels") or {}) for c in found]


register(DockerProvider())
