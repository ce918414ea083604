"""A real Ray cluster of several nodes on this machine, made with ``ray start`` as a user would.

Each node is its own raylet (and workers) on the one local Docker engine; every port with a fixed
default is given a free one, and the cluster lives in a temp folder of its own, so it never meets
another Ray on the machine. ``ray stop`` would stop every Ray of this user on the machine, so the
cluster is stopped by killing exactly its own processes: those naming its temp folder or its
client-server port, and their descendants (the workers, the actors).

    with RayCluster(free_port) as cluster:
        cluster.add_node(slots=1)          # the head (sandbox slots = its etai_sandbox resource)
        worker = cluster.add_node(slots=1)
        cluster.kill(worker)               # the node dies: its raylet and everything under it
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
# The head marks a node dead after ~3 s without heartbeats instead of ~30 s (Ray's system config
# read from RAY_* variables), so a test that kills a node waits for less.
FAST_DETECTION = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


class RayCluster:
    def __init__(self, free_port):
        # Ray's socket paths must stay under 108 bytes: pytest's tmp_path is too deep for them.
        self.temp = Path(tempfile.mkdtemp(prefix="etai-ray-", dir="/tmp"))
        self.free_port = free_port
        self.address: str | None = None
        self.client_port = free_port()
        self.nodes: list[int] = []  # node-manager ports, which name each node's raylet

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_node(self, slots: int) -> int:
        """Start a node with ``slots`` sandbox slots (the first is the head); its raylet's port."""
        port = self.free_port()
        args = [
            f"--resources={json.dumps({'etai_sandbox': slots})}",
            "--num-cpus=1",
            f"--node-manager-port={port}",
            f"--dashboard-agent-listen-port={self.free_port()}",
            "--disable-usage-stats",
            "--node-ip-address=127.0.0.1",  # one address the nodes and the driver all reach
        ]
        if self.address is None:
            gcs = self.free_port()
            args = [
                "--head",
                f"--port={gcs}",
                f"--temp-dir={self.temp}",
                "--include-dashboard=false",
                f"--dashboard-port={self.free_port()}",
                f"--ray-client-server-port={self.client_port}",
                *args,
            ]
            self.address = f"127.0.0.1:{gcs}"
        else:
            args = [f"--address={self.address}", *args]
        env = {**os.environ, **FAST_DETECTION}
        done = subprocess.run(
            [RAY, "start", *args], capture_output=True, text=True, env=env, timeout=180
        )
        if done.returncode:
            raise RuntimeError(f"ray start {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        self.nodes.append(port)
        return port

    def raylet(self, node: int) -> psutil.Process:
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if any(a == f"--node_manager_port={node}" for a in cmd) and "raylet" in cmd[0]:
                return p
        raise LookupError(f"no raylet with node manager port {node}")

    def pids(self, node: int | None = None) -> set[int]:
        """Every process of the cluster (or of one node: its raylet and what runs under it)."""
        if node is not None:
            roots = [self.raylet(node)]
        else:
            roots = [p for p in psutil.process_iter(["cmdline"]) if self._ours(p.info["cmdline"])]
        found = set()
        for r in roots:
            try:
                found |= {r.pid, *(c.pid for c in r.children(recursive=True))}
            except psutil.NoSuchProcess:
                pass
        return found

    def _ours(self, cmd: list[str] | None) -> bool:
        text = " ".join(cmd or [])
        return str(self.temp) in text or (
            "ray.util.client.server" in text and f"--port={self.client_port}" in text
        )

    @contextmanager
    def watch(self) -> Iterator[dict[int, set[int]]]:
        """node -> every pid seen under it while the block runs (actors end with the run, so the
        sandboxes they owned are told by node only while they live)."""
        seen: dict[int, set[int]] = {n: set() for n in self.nodes}
        done = threading.Event()

        def poll() -> None:
            while not done.wait(0.2):
                for n in list(seen):
                    try:
                        seen[n] |= self.pids(n)
                    except LookupError:  # a node killed meanwhile
                        pass

        t = threading.Thread(target=poll, daemon=True)
        t.start()
        try:
            yield seen
        finally:
            done.set()
            t.join()

    def kill(self, node: int) -> None:
        """The node dies at once, as with a machine lost: SIGKILL to its raylet and all below it."""
        _kill(self.pids(node))

    def stop(self) -> None:
        _kill(self.pids())
        shutil.rmtree(self.temp, ignore_errors=True)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    psutil.wait_procs([p for p in map(_proc, pids) if p], timeout=30)


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None
