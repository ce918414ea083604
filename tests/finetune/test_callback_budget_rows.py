"""What a spent time budget leaves behind (#17), without Docker: an episode the budget keeps from
starting is a ``skipped_budget`` row (no sandbox started, nothing judged), and HarnessEval counts
it apart from episodes stopped mid-way and from real infra errors. The same rows from a real
sandbox run are tests/finetune/test_callback_budget.py (ETAI_LONG=1)."""

from __future__ import annotations

import math
import time

import pytest

from finetune.evaluation import eval_metrics
from harness.agents import AgentContext, from_spec
from harness.agents.hf import BUDGET_SPENT, NOT_STARTED, live_model
from harness.runs.loop import run_episode
from harness.suites.load import load_suite

pytestmark = pytest.mark.train
SUITE = load_suite("jest-bugfix")


def test_an_episode_past_the_deadline_is_skipped_without_a_sandbox(tokenizer):
    from finetune.lm import build_tiny

    lm = build_tiny({"arch": "gpt2", "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 256)
    started = []
    past = time.monotonic() - 1
    with live_model("skip", lm, tokenizer, fingerprint="f", deadline=past) as spec:
        agent = from_spec(spec, AgentContext(SUITE, {"max_new_tokens": 4}))
        try:
            row = run_episode(
                SUITE.sessions[0], agent, 0, start_sandbox=started.append, k=1, max_steps=2
            )
        finally:
            agent.close()
    assert started == []  # the deadline is checked before any sandbox starts
    assert row["status"] == "skipped_budget" and row["steps"] == []
    assert BUDGET_SPENT in row["reason"] and NOT_STARTED in row["reason"]


def _row(sid: str, status: str, stg: int | None = None, reason: str | None = None) -> dict:
    return {"session_id": sid, "status": status, "steps_to_green": stg, "reason": reason}


def test_logged_counts_keep_skipped_stopped_and_infra_apart():
    rows = [
        _row("a", "passed", 1),
        _row("b", "failed"),
        _row("c", "skipped_budget", reason=f"hfmem:x: {BUDGET_SPENT}; {NOT_STARTED}"),
        _row("d", "skipped_budget", reason=f"hfmem:x: {BUDGET_SPENT}; {NOT_STARTED}"),
        _row("e", "infra_error", reason=f"hfmem:x: {BUDGET_SPENT}"),  # stopped mid-way
        _row("f", "infra_error", reason="DockerUnavailable: engine gone"),
    ]
    # 8 asked for; 2 had no row at all (the budget was spent before the harness started)
    m = eval_metrics(rows, k=1, n=8, skipped_before=2)
    assert m["harness/skipped_budget"] == 4.0  # c, d and the 2 without a row
    assert m["harness/stopped_budget"] == 1.0 and m["harness/infra_errors"] == 1.0
    assert m["harness/path_accuracy@1"] == 0.5  # a of a, b: nothing else ran to a verdict
    assert m["harness/complete"] == 0.0 and m["harness/error"] == 0.0
    done = eval_metrics([_row("a", "passed", 1)], k=1, n=1)
    assert done["harness/complete"] == 1.0 and done["harness/skipped_budget"] == 0.0
    nothing = eval_metrics([], k=1, n=2, skipped_before=2)
    assert math.isnan(nothing["harness/path_accuracy@1"]) and nothing["harness/complete"] == 0.0
