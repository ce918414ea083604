"""finetune.lockstep on two real gloo processes: ranks with unequal work take part in the same
rounds, the one with less pads them, and every collective is matched (a rank that left the loop
early would leave the other in an all_reduce until the timeout). The generations here are one
all_reduce each, as an FSDP forward is one all-gather per unit; the real FSDP path with HF
``generate`` is test_fsdp.py::test_two_rank_fsdp_evaluates_every_shard_in_lockstep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as tdist

from finetune.lockstep import Lockstep

pytestmark = pytest.mark.train
CALLS = {0: 3, 1: 1}  # generations each rank's work asks for


def _collective() -> float:
    t = torch.ones(1)
    tdist.all_reduce(t)
    return float(t)


def _rank(rank: int, port: int, out: str) -> None:
    tdist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=30),
    )
    lock = Lockstep(torch.device("cpu"), dummy=_collective)

    def work() -> list[float]:
        return [lock.run(_collective) for _ in range(CALLS[rank])]

    got = lock.drive(work)
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"got": got, "rounds": lock.rounds, "padded": lock.padded})
    )
    tdist.destroy_process_group()


def test_unequal_shards_run_the_same_rounds(tmp_path, free_port):
    port, project = str(free_port()), str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": project}
    procs = [
        subprocess.Popen([sys.executable, __file__, str(r), port, str(tmp_path)], env=env)
        for r in (0, 1)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["got"] == [2.0] * 3 and r1["got"] == [2.0]  # each call met the other rank
    assert r0["rounds"] == r1["rounds"] == 3
    assert (r0["padded"], r1["padded"]) == (0, 2)


def test_one_process_runs_calls_and_returns_work_and_errors():
    lock = Lockstep(torch.device("cpu"), dummy=lambda: pytest.fail("no one to pad for"))
    assert lock.drive(lambda: [lock.run(lambda i=i: i * i) for i in range(4)]) == [0, 1, 4, 9]
    assert (lock.rounds, lock.padded) == (4, 0)

    def failing_call() -> None:
        lock.run(lambda: 1 / 0)

    with pytest.raises(ZeroDivisionError):  # raised in the caller's thread, then out of drive
        lock.drive(failing_call)


if __name__ == "__main__":  # one rank of test_unequal_shards_run_the_same_rounds
    _rank(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
