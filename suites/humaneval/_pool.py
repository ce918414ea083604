"""Run many checks over a few warm boxes: one worker thread per box, one check in flight per box.

A box whose driver dies, lies or goes silent is thrown away; the check in flight is the only one
that can have done it (the driver kills every leftover process between checks), so it alone is
charged, and the worker carries on with a fresh container. Every container is removed in finally,
and on Ctrl-C the main thread removes them all before re-raising.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.errors import InfraError
from harness.sandbox import Limits
from suites.humaneval._box import Box, BoxDead, Outcome
from suites.humaneval._samples import Check

# What the check in flight gets when its box is lost (see the module docstring).
BLAME = {
    "driver gone": ("failed", "sandbox killed during the check"),
    "driver unresponsive": ("timeout", "sandbox stopped answering"),
    "protocol violation": ("failed", "sandbox broke the result protocol"),
}


@dataclass(frozen=True)
class PoolConfig:
    image: str
    limits: Limits
    timeout: float
    mem_mb: int
    workers: int
    run_id: str | None = None


def run_checks(
    checks: Iterable[Check], cfg: PoolConfig, on_result: Callable[[Check, Outcome], None]
) -> None:
    """Run every check; ``on_result`` is called from this (the calling) thread only."""
    todo: queue.SimpleQueue[Check] = queue.SimpleQueue()
    n = 0
    for c in checks:
        todo.put(c)
        n += 1
    done: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()
    live: set[Box] = set()
    lock = threading.Lock()

    def worker() -> None:
        box = None
        try:
            while not stop.is_set():
                try:
                    c = todo.get_nowait()
                except queue.Empty:
                    return
                if box is None:
                    try:
                        box = Box(cfg.image, cfg.limits, run_id=cfg.run_id)
                    except InfraError as e:
                        done.put((c, Outcome("infra_error", str(e)[:200], 0.0)))
                        continue
                    with lock:
                        live.add(box)
                try:
                    out = box.run(c.job, timeout=cfg.timeout, mem_mb=cfg.mem_mb)
                except BoxDead as e:
                    status, reason = BLAME[e.reason]
                    out = Outcome(status, reason, 0.0, recycle=True)
                if out.recycle:
                    with lock:
                        live.discard(box)
                    box.close()
                    box = None
                done.put((c, out))
        except BaseException as e:  # noqa: BLE001  a worker never dies silently: the main thread gets an error
            done.put(e)
        finally:
            if box is not None:
                with lock:
                    live.discard(box)
                box.close()
            done.put(None)

    threads = (
        [
            threading.Thread(target=worker, daemon=True, name=f"he-worker-{i}")
            for i in range(max(1, min(cfg.workers, n)))
        ]
        if n
        else []
    )
    for t in threads:
        t.start()
    running = len(threads)
    try:
        while running:
            item = done.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                on_result(*item)
    finally:
        stop.set()
        with lock:
            boxes = list(live)
        for b in boxes:  # unblocks workers waiting on a driver; their late results are dropped
            try:
                b.close()
            except Exception:  # noqa: BLE001, S110  best effort; atexit reaps what is left
                pass
        for t in threads:
            t.join(timeout=30)
