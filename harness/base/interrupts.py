"""SIGTERM handled as Ctrl-C is. Schedulers, `docker stop`, `timeout` and CI cancellation stop a
process with SIGTERM, whose default action ends it at once: its sandboxes stayed until a later run
pruned them, and nothing was said. Raised as a KeyboardInterrupt, it runs the cleanup Ctrl-C runs
(the runner's reaping, every ``finally`` closing a sandbox); the CLI turns it into exit 143."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; exit code 128 + 15, as a shell reports a process SIGTERM ended."""

    exit_code = 143
    said = "terminated (SIGTERM)"


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated in the main thread (signals reach only it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame) -> None:
        # Once: a second SIGTERM must not cut short the cleanup the first one started.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    before = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def interrupted(e: KeyboardInterrupt) -> int:
    """Say what an interrupted command left and return its exit code (130 Ctrl-C, 143 SIGTERM)."""
    said = getattr(e, "said", "interrupted")
    # what a command that is no run left, set on the exception (reports/view/_server.py)
    left = getattr(e, "left", "containers of this run removed, rows written so far kept")
    print(f"etai: {said}; {left}", file=sys.stderr)
    return getattr(e, "exit_code", 130)
