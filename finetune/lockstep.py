"""Generation on every rank of an FSDP model, whose forward is a collective (each FSDP unit
all-gathers its weights): every rank must run the same number of forward passes, in the same
order, whatever its own share of the sessions asks for.

``Lockstep.drive(work)`` runs ``work`` (this rank's ``harness.run``) in a thread and serves
generation on the calling thread, in rounds. Each round every rank says (one ``all_reduce``)
whether it has a generation waiting and whether its work is still going; then, if any rank has
one, every rank calls ``generate`` with ``synced_gpus=True``: its own batch, or a one-token
dummy when it has none (padding the shorter shard). ``synced_gpus`` keeps a rank whose rows ended
stepping until every rank's have, so the calls inside a round match too. The loop ends when no
rank has work left. The agent's batcher thread hands its calls over with ``run(call)``.

The LM's root FSDP unit (embeddings, final norm, LM head) is gathered once for the whole
evaluation (``summon_full_params(recurse=False)``); the blocks gather their own weights in their
forward, one at a time, as in training.

A rank whose ``generate`` raises part-way leaves the others waiting in a collective until the
process group's timeout (``train.dist_timeout``); that error then reaches every rank.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
_POLL_S = 0.005  # how long a round waits for a local generation before asking the others


@dataclass
class _Call:
    fn: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class Lockstep:
    """See the module doc. ``dummy()`` is one padding generation (synced_gpus=True)."""

    def __init__(self, device: Any, dummy: Callable[[], Any]):
        self.device, self.dummy = device, dummy
        self._calls: queue.Queue[_Call] = queue.Queue()
        self.rounds = 0  # rounds in which some rank generated
        self.padded = 0  # of those, rounds in which this rank had nothing and ran the dummy

    def run(self, fn: Callable[[], T]) -> T:
        """From any thread but the driving one: ``fn()`` run in the next round; its result."""
        call = _Call(fn)
        self._calls.put(call)
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result

    def drive(self, work: Callable[[], T]) -> T:
        """``work()`` in a thread, generation rounds here until every rank's work is done."""
        import torch
        from composer.utils import dist

        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = work()
            except BaseException as e:  # noqa: BLE001 - re-raised below, after the last round
                box["error"] = e

        thread = threading.Thread(target=target, name="etai-lockstep-work", daemon=True)
        thread.start()
        while True:
            try:
                call: _Call | None = self._calls.get(timeout=_POLL_S)
            except queue.Empty:
                call = None
            # Finished only when no call can come any more: work returned and nothing queued.
            going = call is not None or thread.is_alive() or not self._calls.empty()
            flags = torch.tensor([int(call is not None), int(going)], device=self.device)
            dist.all_reduce(flags)  # SUM over ranks: the same answer everywhere
            waiting, running = (int(x) for x in flags.tolist())
            if not running:
                break
            if waiting:
                self._round(call)
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    def _round(self, call: _Call | None) -> None:
        import torch

        self.rounds += 1
        with torch.no_grad():
            if call is None:
                self.padded += 1
                self.dummy()
                return
            try:
                call.result = call.fn()
            except BaseException as e:  # noqa: BLE001 - the agent's thread gets it (InfraError)
                call.error = e
            finally:
                call.done.set()
