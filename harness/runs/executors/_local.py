"""The local executor: the runner's thread pool in this process, with the kind's own worker."""

from __future__ import annotations

import threading

from harness.base.errors import InputError
from harness.runs.executors import EXECUTORS, Batch, Done
from harness.runs.runner import execute


class LocalRun:
    def __init__(self, workers: int, progress: bool):
        self.workers, self.progress = workers, progress

    def map(self, batch: Batch, done: Done) -> None:
        stop = threading.Event()
        worker = batch.local  # shares the driver's agents (a model loaded once) and sandbox pool

        def work(job) -> None:
            if stop.is_set():
                return
            result = worker.run(job)
            if not stop.is_set():  # after Ctrl-C a killed sandbox is not the job's result
                done(job, result)

        execute([(j,) for j in batch.jobs], work, self.workers, stop, self.progress, batch.what)

    def close(self) -> None:
        pass


class LocalExecutor:
    name = "local"
    description = "a thread pool in this process, --workers at once (default)"

    def open(self, arg: str | None, *, workers: int, progress: bool) -> LocalRun:
        if arg:
            raise InputError(
                f"the local executor takes no address (got {arg!r})", where="--executor"
            )
        return LocalRun(workers, progress)


EXECUTORS.register("local", LocalExecutor(), description=LocalExecutor.description)
