"""The asynchronous evaluation's export: a detached snapshot, written in another thread while
training goes on, holds the weights of the step it was taken at, whatever training does next; and
the keeper of evaluation processes returns at once while the export is still being written."""

from __future__ import annotations

import sys
import threading
import time

import pytest
import torch
from transformers import AutoModelForCausalLM

from finetune.async_eval import AsyncEvals
from finetune.export import snapshot_hf
from finetune.lm import build_tiny
from finetune.model import AgentModel

pytestmark = pytest.mark.train


def _model(tokenizer) -> AgentModel:
    torch.manual_seed(0)
    lm = build_tiny({"arch": "gpt2", "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 256)
    return AgentModel(lm, tokenizer, None)


def _train_a_step(model: AgentModel) -> None:
    """What an optimizer step does to the live tensors: changes them in place."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)


@pytest.mark.parametrize("detach", [True, False])
def test_a_detached_snapshot_keeps_the_weights_of_its_step(tokenizer, tmp_path, detach):
    model = _model(tokenizer)
    before = {k: v.clone() for k, v in model.lm.state_dict().items()}
    snapshot = snapshot_hf(model, None, max_result_chars=300, heads=True, detach=detach)
    _train_a_step(model)
    folder = snapshot.write(tmp_path / "hf")
    written = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    same = all(torch.equal(written[k], before[k]) for k in before)
    # without detach the live tensors are written: the step taken after the snapshot shows
    assert same is detach
    assert (snapshot.tokenizer is not model.tokenizer) is detach  # the write sets its template


def test_the_keeper_returns_while_the_export_is_written_and_starts_after_it(tmp_path):
    release, wrote = threading.Event(), []

    def write() -> None:  # an export that takes as long as the test says
        assert release.wait(60)
        (tmp_path / "hf").mkdir()
        wrote.append(time.monotonic())

    evals = AsyncEvals(
        "unused", metrics_of=lambda rows: {"rows": len(rows)}, keep_exports=True, max_running=1
    )
    code = f"import os, sys; sys.exit(0 if os.path.isdir({str(tmp_path / 'hf')!r}) else 7)"
    t0 = time.monotonic()
    p = evals.launch(
        [sys.executable, "-c", code],
        batch=2,
        folder=tmp_path / "hf",
        out=tmp_path / "ba2",
        write=write,
    )
    assert time.monotonic() - t0 < 5 and not p.done() and evals.busy()
    assert p.proc is None  # nothing is started before the export is complete
    release.set()
    [(batch, metrics)] = evals.collect(wait_s=60)
    assert batch == 2 and p.proc.returncode == 0  # the process saw the written folder
    # exit 0 without rows: an evaluation that left nothing to score is an error, not a result
    assert metrics["harness/error"] == 1.0 and metrics["harness/write_seconds"] > 0
    assert metrics["harness/eval_seconds"] > 0
    assert p.written >= wrote[0]


def test_a_failed_export_is_the_evaluations_error_and_no_process_starts(tmp_path):
    def write() -> None:
        raise OSError("disk full")

    evals = AsyncEvals("unused", metrics_of=lambda rows: {}, keep_exports=True, max_running=1)
    p = evals.launch(["false"], batch=4, folder=tmp_path / "hf", out=tmp_path / "ba4", write=write)
    [(batch, metrics)] = evals.collect(wait_s=60)
    assert batch == 4 and metrics["harness/error"] == 1.0 and p.proc is None
    assert "disk full" in p.error
