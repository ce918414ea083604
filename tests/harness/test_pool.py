"""The sandbox pool's bookkeeping (harness/sandbox/_docker.py ``Pool``) with container starts
replaced by a stand-in: no Docker engine needed."""

from __future__ import annotations

import threading
import time

from harness.base.errors import InfraError
from harness.sandbox import Limits, _docker


def test_acquirers_waiting_on_failed_starts_all_make_their_own_at_once(tmp_path, monkeypatch):
    """Workers wait for the pool's starts and every start fails (an engine refusing new
    containers): each worker must go on to a start of its own at once. With one of them woken per
    failed start, the others slept through acquire's whole 60 s wait (scripts/chaos's pool-full
    fault held a run a minute per failure)."""
    gate = threading.Event()
    starts: list[float] = []

    class Refused:
        def __init__(self, image, limits, *, run_id=None):
            gate.wait(30)
            starts.append(time.monotonic())
            raise InfraError("docker could not start a sandbox: the engine is at capacity")

    monkeypatch.setattr(_docker, "DockerSandbox", Refused)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.js").write_text("module.exports = 1;\n")
    pool = _docker.Pool("no-image", Limits(), size=2)  # two starts under way at once
    failed: list[float] = []

    def acquire() -> None:
        try:
            pool.acquire(ws)
        except InfraError:
            failed.append(time.monotonic())

    workers = [threading.Thread(target=acquire) for _ in range(3)]
    for w in workers:
        w.start()
    end = time.monotonic() + 10
    while len(pool._cv._waiters) < 3:  # every acquirer waits on the pool's starts
        assert time.monotonic() < end, "the acquirers never waited on the starts"
        time.sleep(0.01)
    t0 = time.monotonic()
    gate.set()
    for w in workers:
        w.join(timeout=70)
    pool.close()
    assert len(failed) == 3, failed
    assert max(failed) - t0 < 5, f"an acquirer slept {max(failed) - t0:.0f} s after the failures"
    assert len(starts) == 5, "the pool's two starts and one start of each acquirer's own"
