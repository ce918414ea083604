"""Executors: where a run's jobs execute. One protocol, one registry (``etai.executors``).

A suite kind hands its work over as a ``Batch``: picklable job specs and a picklable ``Recipe``
from which any process builds the ``Worker`` that turns one job into its result (loading the suite
and the agents and preparing the sandbox backend *there*, on that node's Docker engine). The kind
keeps every decision about rows (which keys are stored, what a row holds, the summary) and its
driver process is the single writer of ``results.jsonl``: an executor only hands each result back
to the kind's ``done`` callback, in the driver's process, so resume, dedup and the summary behave
the same whatever runs the jobs.

Built in: ``local`` (a thread pool in this process using the kind's own open worker: today's
behaviour) and ``ray[:ADDRESS]`` (an existing Ray cluster; harness/runs/executors/_ray.py).
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.base.errors import InputError
from harness.base.registry import Registry


class Worker(Protocol):
    """Turns jobs into results in the process that holds it; ``run`` is called from many threads."""

    def run(self, job: Any) -> Any: ...

    def close(self) -> None: ...


class Recipe(Protocol):
    """Picklable: everything another process needs to build the Worker (suite, agents, sandbox)."""

    def open(self, *, slots: int) -> Worker:
        """The Worker of this process, for ``slots`` jobs at once (its warm sandbox pool)."""
        ...


@dataclass
class Batch:
    what: str  # the progress bar's label: "preflight", "episodes"
    jobs: Sequence[Any]  # picklable job specs
    recipe: Recipe
    local: Worker  # the driver's own open worker (its agents, its pool), for jobs run here


Done = Callable[[Any, Any], None]  # done(job, result), called in the driver's process


class Running(Protocol):
    """An executor opened for one run: ``map`` may be called once per batch, then ``close``."""

    def map(self, batch: Batch, done: Done) -> None:
        """Run every job; call ``done`` once per finished job. A job lost with its machine is run
        again elsewhere or left without a result (a rerun fills it); never reported twice."""
        ...

    def close(self) -> None: ...


class Executor(Protocol):
    name: str
    description: str

    def open(self, arg: str | None, *, workers: int, progress: bool) -> Running:
        """Connect and check (InputError naming --executor) before any job runs. ``arg`` is what
        follows the name in the spec (``ray:ADDRESS``); ``workers`` the run's local threads."""
        ...


EXECUTORS: Registry[Executor] = Registry(
    "executor",
    group="etai.executors",
    builtins=("harness.runs.executors._local", "harness.runs.executors._ray"),
    where="--executor",
)


def parse(spec: str) -> tuple[Executor, str | None]:
    """``NAME[:ARG]`` -> (the registered executor, ARG or None); InputError for an unknown name."""
    if not isinstance(spec, str):
        raise InputError(f"expected an executor spec, got {spec!r}", where="--executor")
    name, _, arg = spec.partition(":")
    return EXECUTORS.get(name), (arg or None)


@contextmanager
def opened(spec: str, *, workers: int, progress: bool) -> Iterator[Running]:
    """The executor ``spec`` opened for one run, closed when the block ends."""
    executor, arg = parse(spec)
    running = executor.open(arg, workers=workers, progress=progress)
    try:
        yield running
    finally:
        running.close()


class ShippedFolder:
    """A folder that travels by value: pickled as a tar of its files, unpacked into a temp folder
    in the process where it arrives (a suite's workspaces reach a node that lacks the path)."""

    def __init__(self, path: str | Path):
        self._path: Path | None = Path(path)
        self._tar: bytes | None = None
        self._unpacked = False

    def __getstate__(self) -> dict[str, Any]:
        if self._tar is None:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(str(self._path), arcname=".")
            self._tar = buf.getvalue()  # packed once, however many nodes it goes to
        return {"tar": self._tar}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._path, self._tar, self._unpacked = None, state["tar"], False

    def path(self) -> Path:
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix="etai-shipped-"))
            self._unpacked = True
            with tarfile.open(fileobj=io.BytesIO(self._tar), mode="r:gz") as tar:
                tar.extractall(self._path, filter="data")
        return self._path

    def remove(self) -> None:
        """Remove the unpacked copy (never the folder it was shipped from)."""
        if self._unpacked and self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path, self._unpacked = None, False
