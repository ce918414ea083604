"""The Ray executor: a run's jobs on an existing Ray cluster; the driver stays the single writer.

Jobs go only to nodes that declare the ``etai_sandbox`` resource (``ray start --resources
'{"etai_sandbox": N}'``, N = jobs at once there). On each such node one long-lived actor holds the
node's Worker — the suite shipped once per node through the object store, the agents, and the
sandbox backend prepared on that node's engine (image checked against the driver's, leftovers of
dead runs pruned, a warm pool) — and runs N jobs at once on its threads. The driver hands out jobs
as slots free up and gives each result to the kind's ``done``. A node lost mid-run takes its actor
and its jobs' results with it: those jobs run again on the other nodes and are reported once; with
no node left the run stops with InfraError, and rerunning the command fills the missing rows.

``ray`` (the optional extra ``etai[ray]``) is imported only when this executor is opened.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any

from harness.base.errors import InfraError, InputError
from harness.base.progress import bar as progress_bar
from harness.runs.executors import EXECUTORS, Batch, Done, Recipe
from harness.sandbox import reap_own

RESOURCE = "etai_sandbox"
WHERE = "--executor"


class NodeWorker:
    """The actor of one node (made remote when the executor opens, so ray is imported only then).
    A Worker that fails to open is kept as its error and handed to the driver by ``ready``: a typed
    error (an image of another etai version, no engine) then reaches the CLI as itself."""

    def __init__(self, recipe: Recipe, slots: int):
        self.worker, self.error = None, None
        try:
            self.worker = recipe.open(slots=slots)
        except Exception as e:
            self.error = e

    def ready(self) -> Exception | None:
        return self.error

    def run(self, job: Any) -> Any:
        return self.worker.run(job)

    def reap(self) -> None:  # Ctrl-C: kill this node's sandboxes now, so running jobs end fast

        reap_own()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


@dataclass
class _Node:
    ip: str
    actor: Any
    slots: int
    busy: int = 0
    alive: bool = True


class RayRun:
    def __init__(self, ray, nodes: list[tuple[str, str, int]], progress: bool, owns: bool):
        self.ray, self.progress, self.owns = ray, progress, owns
        self.sandbox_nodes = nodes  # (node id, ip, slots)
        self.recipe: Recipe | None = None
        self.nodes: list[_Node] = []

    def map(self, batch: Batch, done: Done) -> None:
        # Every node prepares even for an empty batch: its prune removes what dead runs left.
        nodes = self._nodes_for(batch.recipe)
        if not batch.jobs:
            return

        ray = self.ray
        queue, inflight = deque(batch.jobs), {}
        bar = progress_bar(len(queue), batch.what, enabled=self.progress)
        try:
            while queue or inflight:
                for node in nodes:
                    while queue and node.alive and node.busy < node.slots:
                        job = queue.popleft()
                        inflight[node.actor.run.remote(job)] = (job, node)
                        node.busy += 1
                if not inflight:
                    raise InfraError(
                        f"every Ray node with the {RESOURCE} resource was lost; {len(queue)} "
                        f"{batch.what} jobs did not run: rerun the same command to run them"
                    )
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    job, node = inflight.pop(ref)
                    node.busy -= 1
                    try:
                        result = ray.get(ref)  # a harness bug in the job is raised as itself
                    except ray.exceptions.RayActorError:  # its node died: run it elsewhere
                        node.alive = False
                        queue.appendleft(job)
                        continue
                    done(job, result)
                    bar.update(1)
        except BaseException:
            for ref in inflight:
                ray.cancel(ref)
            self._call_all("reap")
            raise
        finally:
            bar.close()

    def _nodes_for(self, recipe: Recipe) -> list[_Node]:
        if recipe is self.recipe:
            return self.nodes
        self._close_nodes()
        ray = self.ray
        # ray: the ray extra
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = ray.remote(concurrency_groups={"control": 1})(NodeWorker)
        shipped = ray.put(recipe)  # once into the object store; each node fetches it once
        self.recipe, self.nodes = recipe, []
        for node_id, ip, slots in self.sandbox_nodes:
            handle = actor.options(
                num_cpus=0,
                resources={RESOURCE: slots},
                max_concurrency=slots,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(shipped, slots)
            self.nodes.append(_Node(ip, handle, slots))
        for node in self.nodes:
            try:
                error = ray.get(node.actor.ready.remote())
            except ray.exceptions.RayActorError:
                node.alive = False  # lost while starting: the others take its share
                continue
            if error is not None:
                self._close_nodes()
                raise error
        return self.nodes

    def _call_all(self, method: str, timeout: float = 60) -> None:
        """``method`` on every live actor at once, on its control thread (its job threads may all
        be busy); a node that dies or does not answer in time is skipped."""
        ray = self.ray
        refs = [
            getattr(n.actor, method).options(concurrency_group="control").remote()
            for n in self.nodes
            if n.alive
        ]
        for ref in refs:
            try:
                ray.get(ref, timeout=timeout)
            except (ray.exceptions.RayError, TimeoutError):
                pass

    def _close_nodes(self) -> None:
        self._call_all("close", timeout=120)  # agents closed, warm pools removed
        for n in self.nodes:
            self.ray.kill(n.actor)
        self.nodes, self.recipe = [], None

    def close(self) -> None:
        try:
            self._close_nodes()
        finally:
            if self.owns:
                self.ray.shutdown()


class RayExecutor:
    name = "ray"
    description = (
        f"an existing Ray cluster (ray[:ADDRESS], default $RAY_ADDRESS or auto); jobs run on the "
        f"nodes that declare the {RESOURCE} resource"
    )

    def open(self, arg: str | None, *, workers: int, progress: bool) -> RayRun:
        try:
            # ray: the ray extra
            import ray
        except ImportError as e:
            raise InputError(
                f"the ray executor needs Ray: pip install 'etai[ray]' ({e})", where=WHERE
            ) from e
        address = arg or os.environ.get("RAY_ADDRESS") or "auto"
        owns = not ray.is_initialized()  # inside a Ray job: use its connection, leave it open
        if owns:
            _probe(address)
            _cluster_messages_to_stderr(ray)
            try:
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            except Exception as e:  # ConnectionError, a malformed address, ...
                raise InputError(
                    f"no Ray cluster answers at {address!r} ({type(e).__name__}: {e})", where=WHERE
                ) from e
        nodes = [
            (n["NodeID"], n["NodeManagerAddress"], int(n["Resources"][RESOURCE]))
            for n in ray.nodes()
            if n["Alive"] and n["Resources"].get(RESOURCE, 0) >= 1
        ]
        if not nodes:
            if owns:
                ray.shutdown()
            raise InputError(
                f"no live node of the Ray cluster at {address!r} declares the {RESOURCE} resource; "
                f"start sandbox nodes with ray start --resources '{{\"{RESOURCE}\": N}}' "
                "(N = episodes at once on that node)",
                where=WHERE,
            )
        return RayRun(ray, nodes, progress, owns)


def _cluster_messages_to_stderr(ray) -> None:
    """Ray prints the cluster's messages to the driver (a node marked dead, ...) on stdout, where
    `etai run --json` writes its summary: they go to stderr instead (Ray's private printer,
    wrapped only where it exists)."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    show = getattr(worker, "print_to_stdstream", None)
    if show is None or getattr(show, "etai_stderr", False):
        return

    def to_stderr(data: dict, **kw: Any) -> None:
        show({**data, "is_err": True}, **kw)

    to_stderr.etai_stderr = True
    worker.print_to_stdstream = to_stderr


def _probe(address: str) -> None:
    """ray.init retries an address that does not answer for ever: a HOST:PORT is tried first."""
    host, _, port = address.rpartition(":")
    if address == "auto" or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise InputError(f"no Ray cluster answers at {address!r}: {e}", where=WHERE) from e


EXECUTORS.register("ray", RayExecutor(), description=RayExecutor.description)
