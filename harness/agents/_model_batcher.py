"""A micro-batcher: concurrent callers hand in one item each, one thread runs them as a batch.

The runner drives episodes from worker threads, each blocked in ``act`` while its model thinks.
Generating for all of them in one padded call is what makes a local model worth its device; so
``submit`` enqueues the request and waits, and a single worker thread takes the first request,
keeps collecting for ``wait_s`` (or until ``max_batch``), and calls ``run_batch`` once. The model is
only ever touched from that thread, so the backend needs no locks of its own.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class BatcherClosed(RuntimeError):
    pass


class MicroBatcher(Generic[In, Out]):
    def __init__(
        self,
        run_batch: Callable[[Sequence[In]], Sequence[Out]],
        *,
        max_batch: int = 8,
        wait_s: float = 0.005,
        name: str = "etai-batcher",
    ):
        self._run_batch = run_batch
        self.max_batch = max(1, max_batch)
        self.wait_s = max(0.0, wait_s)
        self._queue: queue.Queue[tuple[In, Future] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._name = name
        self.batch_sizes: list[int] = []  # one entry per run_batch call; tests and logs read it

    def submit(self, item: In) -> Out:
        """Run ``item`` in the next batch and return its result (or raise what the batch raised)."""
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise BatcherClosed("the model backend was closed")
            if (
                self._thread is None
            ):  # started on first use: an agent that never acts costs no thread
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put((item, fut))
        return fut.result()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
            self._queue.put(None)
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return self._fail_pending()
            batch = [first]
            deadline = time.monotonic() + self.wait_s
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            self._run(batch)
            if stop:
                return self._fail_pending()

    def _run(self, batch: list[tuple[Any, Future]]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            outs = list(self._run_batch([item for item, _ in batch]))
            if len(outs) != len(batch):
                raise RuntimeError(f"batch of {len(batch)} gave {len(outs)} results")
        except BaseException as e:  # noqa: BLE001  every waiter must wake up, whatever happened
            for _, fut in batch:
                fut.set_exception(e)
            return
        for (_, fut), out in zip(batch, outs):
            fut.set_result(out)

    def _fail_pending(self) -> None:
        while True:
            try:
                rest = self._queue.get_nowait()
            except queue.Empty:
                return
            if rest is not None:
                rest[1].set_exception(BatcherClosed("the model backend was closed"))
