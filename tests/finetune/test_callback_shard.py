"""Sharded in-training evaluation (#17): without FSDP every rank holds the whole model, so each
evaluates its share of the sessions in its own folder and rank 0 merges the rows into one folder
and one summary. Measured here, 2 ranks against 1 on the same sessions (CPU, gloo, real Docker);
the figure is printed, not asserted (a shared 2-core machine makes any time bound flaky)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runs.results import read_rows
from harness.suites.load import load_suite

pytestmark = [
    pytest.mark.train,
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("ETAI_LONG"), reason="minutes of sandboxes: ETAI_LONG=1 runs it"
    ),
]
PROJECT = Path(__file__).resolve().parents[2]
TINY_CONFIG = PROJECT / "finetune" / "configs" / "tiny-cpu.yaml"
SUITE = "jest-bugfix"
SESSIONS = [s.session_id for s in load_suite(SUITE).sessions][6:10]


def _run(
    folder: Path, ranks: int, tiny_overrides, port: int, budget_s: float = 170, workers: int = 2
) -> float:
    spec = (
        f"{{interval: 1ba, suite: {SUITE}, sessions: [{', '.join(SESSIONS)}], k: 1, "
        f"max_steps: 2, workers: {workers}, budget_s: {budget_s}, "
        "generation: {max_new_tokens: 16}, "
        "at_fit_end: false}"
    )
    overrides = tiny_overrides(
        folder,
        data__format="memory",
        train__max_duration="1ba",
        train__save_interval="100ep",
        train__autoresume="false",
        callbacks__harness_eval=spec,
    )
    folder.mkdir(parents=True)
    launch = [os.path.join(os.path.dirname(sys.executable), "composer"), "-n", str(ranks)]
    launch += ["--master_port", str(port), "--stdout", str(folder / "out{rank}.txt")]
    launch += ["--stderr", str(folder / "err{rank}.txt"), "-m", "finetune.train"]
    cmd = [*launch, str(TINY_CONFIG), *(x for o in overrides for x in ("--set", o))]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (folder / "log.txt").read_text()
    return float(re.findall(r"harness/eval_seconds\W+([0-9.]+)", log)[-1])


def test_two_ranks_share_the_sessions_and_rank0_writes_one_folder(
    tmp_path, tiny_overrides, free_port
):
    _run(tmp_path / "warm", 1, tiny_overrides, free_port())  # image and preflight cached
    one = _run(tmp_path / "one", 1, tiny_overrides, free_port())
    two = _run(tmp_path / "two", 2, tiny_overrides, free_port())
    merged = tmp_path / "two" / "ckpt" / "harness-eval" / "ba1"
    rows = read_rows(merged / "results.jsonl")
    assert sorted(r["session_id"] for r in rows) == sorted(SESSIONS)
    shards = [read_rows(merged / f"rank{r}" / "results.jsonl") for r in (0, 1)]
    assert [len(s) for s in shards] == [2, 2]  # each rank ran its half
    assert (merged / "summary.json").exists()
    print(f"eval of {len(SESSIONS)} sessions: 1 rank {one:.1f} s, 2 ranks {two:.1f} s")


def test_one_second_budget_on_two_ranks(tmp_path, tiny_overrides, free_port):
    """budget_s = 1 with each rank driving its own shard: rank 0's eval_seconds is taken after the
    gather, which waits for every rank, so it bounds the evaluation on both. Every session still
    has its row (run, stopped or not started); the bound is in one verification measured here."""
    sys.path.insert(0, str(Path(__file__).parent))  # the one-rank test's module, beside this file
    from test_callback_budget import _one_verification  # the same measure as the one-rank test

    verification = _one_verification(tmp_path / "oracle", SESSIONS)  # their preflights cached
    # One sandbox per rank: as many at once as the one-rank test's two workers (two cores here).
    seconds = _run(tmp_path / "two", 2, tiny_overrides, free_port(), budget_s=1, workers=1)
    merged = tmp_path / "two" / "ckpt" / "harness-eval" / "ba1"
    rows = read_rows(merged / "results.jsonl")
    assert sorted(r["session_id"] for r in rows) == sorted(SESSIONS)
    skipped = [r for r in rows if r["status"] == "skipped_budget"]
    assert all(r["steps"] == [] for r in skipped)
    print(
        f"budget 1 s, 2 ranks: eval {seconds:.2f} s, one verification {verification:.2f} s, "
        f"{len(skipped)} of {len(SESSIONS)} not started"
    )
    assert seconds <= 1 + verification  # as the one-rank test: the Done-when bound of #17
