"""Run many checks over a few warm boxes: the runner's one thread pool (harness.runs.runner.execute),
each worker thread keeping its own box, one check in flight per box.

A box whose driver dies, lies or goes silent is thrown away; the check in flight is the only one
that can have done it (the driver kills every leftover process between checks), so it alone is
charged, and the thread carries on with a fresh container. Every box is closed when the run ends,
and on Ctrl-C the runner reaps this process's containers before re-raising.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.base.errors import InfraError
from harness.runs.runner import execute
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
    checks: Iterable[Check],
    cfg: PoolConfig,
    on_result: Callable[[Check, Outcome], None],
    *,
    progress: bool = False,
) -> None:
    """Run every check; ``on_result`` is called from the worker threads (it must be thread-safe)."""

    mine = threading.local()  # this worker thread's box
    live: set[Box] = set()
    lock = threading.Lock()

    def check_one(c: Check) -> None:
        box = getattr(mine, "box", None)
        if box is None:
            try:
                box = Box(cfg.image, cfg.limits, run_id=cfg.run_id)
            except InfraError as e:
                on_result(c, Outcome("infra_error", str(e)[:200], 0.0))
                return
            mine.box = box
            with lock:
                live.add(box)
        try:
            out = box.run(c.job, timeout=cfg.timeout, mem_mb=cfg.mem_mb)
        except BoxDead as e:
            status, reason = BLAME[e.reason]
            out = Outcome(status, reason, 0.0, recycle=True)
        if out.recycle:
            mine.box = None
            with lock:
                live.discard(box)
            box.close()
        on_result(c, out)

    try:
        execute(
            [(c,) for c in checks], check_one, cfg.workers, threading.Event(), progress, "humaneval"
        )
    finally:
        with lock:
            boxes, live = list(live), set()
        for b in boxes:
            try:
                b.close()
            except Exception:  # noqa: BLE001, S110  best effort; atexit reaps what is left
                pass
