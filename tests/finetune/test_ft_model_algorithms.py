"""The agent model's heads, routing and optimizer groups; the algorithms on real Composer state pieces."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch
from composer.core import Event
from composer.devices import DeviceCPU

from finetune.algorithms import (
    LossWeightSchedule,
    ReferenceForward,
    SequenceLengthWarmup,
    ToolFailureMask,
    warmup_length,
)
from finetune.config import Config
from finetune.data import collate_examples, to_record
from finetune.errors import ConfigError
from finetune.examples import MISSING, build_example
from finetune.lm import apply_lora, build_lm, build_tiny
from finetune.losses import CompositeLoss, KLControlLoss
from finetune.model import DEFAULT_HEAD_LRS, AgentModel, allowed_tool_matrix, route_tools
from harness.session.intents import INTENTS
from harness.tools import tool_names

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def batch(sessions, tokenizer):
    records = [to_record(build_example(s, tokenizer, max_seq_len=4096)) for s in sessions[:3]]
    return collate_examples(records, pad_id=tokenizer.pad_token_id)


def _model(tokenizer, arch="gpt2", loss=None):
    torch.manual_seed(0)
    lm = build_tiny({"arch": arch, "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 4096)
    return AgentModel(lm, tokenizer, loss or CompositeLoss())


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_forward_gives_every_head_and_the_composite_loss_backpropagates(tokenizer, batch, arch):
    model = _model(tokenizer, arch)
    out = model(batch)
    b, s = batch["tool_pos"].shape
    assert out["logits"].shape[:2] == batch["input_ids"].shape
    assert out["intent_logits"].shape == (b, len(INTENTS))
    assert out["tool_logits"].shape == (b, s, len(tool_names()))
    assert out["reward_logits"].shape == (b, s) and out["cursor"].shape == (b, 4)
    loss = model.loss(out, batch)
    assert set(loss) == {"total", "code", "intent", "tool", "cursor", "reward"}
    loss["total"].backward()
    assert (
        model.intent_head[0].weight.grad.abs().sum() > 0
        and model.cursor_head.weight.grad.abs().sum() > 0
    )


def test_routing_masks_tools_the_intent_forbids_and_adds_the_bias():
    allowed = allowed_tool_matrix()
    intent = torch.zeros(1, len(INTENTS))
    intent[0, INTENTS.index("fix_test_failure")] = 5.0
    bias = torch.zeros(len(tool_names()))
    bias[tool_names().index("jest_run")] = -0.5
    routed = route_tools(torch.zeros(1, 1, len(tool_names())), intent, allowed, bias)[0, 0]
    assert routed[tool_names().index("file_write")] == float(
        "-inf"
    )  # fix_test_failure may not write files
    assert (
        routed[tool_names().index("jest_run")] == -0.5
        and routed[tool_names().index("file_edit")] == 0.0
    )
    intent[0, INTENTS.index("fix_module_export")] = 9.0
    assert (
        route_tools(torch.zeros(1, 1, 8), intent, allowed)[0, 0, tool_names().index("file_write")]
        == 0.0
    )


def test_param_groups_use_per_head_learning_rates(tokenizer):
    model = _model(tokenizer)
    groups = model.param_groups(1e-3)
    assert [g["lr"] for g in groups] == [
        1e-3,
        1e-4,
        5e-5,
        2e-5,
        3e-5,
    ]  # lm, intent, tool, reward, cursor
    assert DEFAULT_HEAD_LRS == {"intent": 1e-4, "tool": 5e-5, "reward": 2e-5, "cursor": 3e-5}
    assert groups[1]["params"][0] is model.intent_head[0].weight
    n_params = sum(p.numel() for g in groups for p in g["params"])
    assert n_params == sum(p.numel() for p in model.parameters())


def test_lora_trains_adapters_only(tokenizer):
    lm = build_tiny({"arch": "gpt2", "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 512)
    lm = apply_lora(
        lm, {"r": 4, "lora_alpha": 8, "target_modules": ["c_attn"], "fan_in_fan_out": True}
    )
    model = AgentModel(lm, tokenizer, CompositeLoss())
    lm_group = model.param_groups(1e-3)[0]["params"]
    assert lm_group and all(p.requires_grad for p in lm_group)
    assert sum(p.numel() for p in lm_group) < sum(p.numel() for p in lm.parameters()) / 10


def test_four_bit_without_cuda_is_a_config_error(tokenizer):
    if torch.cuda.is_available():
        pytest.skip("this checks the CPU-only error; a CUDA machine would try to load")
    cfg = Config({"model": {"pretrained": "some/model", "load_in_4bit": True}})
    with pytest.raises(ConfigError, match="^model.load_in_4bit: 4-bit loading needs a CUDA device"):
        build_lm(cfg, tokenizer, 128)


def _state(model, batch, epoch=0, elapsed=None):
    """The State fields these algorithms read, around a real model and device."""
    return SimpleNamespace(
        model=model,
        batch=dict(batch),
        device=DeviceCPU(),
        precision="fp32",
        precision_config=None,
        timestamp=SimpleNamespace(epoch=epoch),
        get_elapsed_duration=lambda: elapsed,
    )


class _Logger:
    def __init__(self):
        self.metrics = {}

    def log_metrics(self, metrics):
        self.metrics.update(metrics)


def test_tool_failure_mask_bias_by_hand(tokenizer, batch):
    model = _model(tokenizer)
    algo = ToolFailureMask(max_bias=2.0, prior=1.0)
    state = _state(model, batch)
    assert algo.match(Event.AFTER_DATALOADER, state)
    algo.apply(Event.AFTER_DATALOADER, state, _Logger())
    # sessions 0-2 each run jest twice, failing the first time: 6 calls, 3 failed; file_edit 3 calls, 0 failed
    jest, edit = tool_names().index("jest_run"), tool_names().index("file_edit")
    assert algo.calls[jest] == 6 and algo.failures[jest] == 3
    assert model.tool_bias[jest].item() == pytest.approx(-2.0 * (3 + 0.5) / (6 + 1))
    assert model.tool_bias[edit].item() == pytest.approx(-2.0 * 0.5 / 4)
    assert (model.tool_bias >= -2.0).all() and (model.tool_bias <= 0).all()
    restored = ToolFailureMask(max_bias=2.0)
    restored.load_state_dict(algo.state_dict())
    assert torch.equal(restored.bias(), algo.bias())


def test_loss_weight_schedule_pushes_epoch_weights_into_the_loss(tokenizer, batch):
    model, logger = _model(tokenizer), _Logger()
    algo = LossWeightSchedule("default")
    algo.apply(Event.BATCH_START, _state(model, batch, epoch=5), logger)
    assert model.loss_fn.weights.intent == 0.15 and logger.metrics["loss_weights/intent"] == 0.15
    assert algo.state_dict() == {
        "schedule": "default",
        "epoch": 5,
        "weights": {"code": pytest.approx(0.7), "intent": 0.15, "cursor": 0.10, "reward": 0.20},
    }


def test_warmup_length_and_truncation_marks_cut_positions(tokenizer, batch):
    assert warmup_length(0.0, 0.5, 64, 1024, 8) == 64
    assert warmup_length(0.25, 0.5, 64, 1024, 8) == 544  # 64 + 960/2
    assert warmup_length(0.9, 0.5, 64, 1024, 8) == 1024
    state = _state(_model(tokenizer), batch, elapsed=SimpleNamespace(value=0.0))
    logger = _Logger()
    SequenceLengthWarmup(duration=0.5, min_seq_len=64, max_seq_len=1024).apply(
        Event.AFTER_DATALOADER, state, logger
    )
    assert (
        state.batch["input_ids"].shape[1] == 64
        and logger.metrics["seq_length_warmup/seq_len"] == 64
    )
    assert ((state.batch["tool_pos"] < 64) | (state.batch["tool_pos"] == MISSING)).all()
    assert (state.batch["cursor_pos"] == MISSING).all()
    loss = _model(tokenizer).loss(_model(tokenizer)(state.batch), state.batch)  # still computable
    assert torch.isfinite(loss["total"])


def test_reference_forward_runs_without_grad_and_caches_per_example(tokenizer, batch):
    model = _model(tokenizer, loss=KLControlLoss(beta=0.1))
    ref = build_tiny({"arch": "gpt2", "layers": 1, "heads": 2, "hidden": 32}, len(tokenizer), 4096)
    algo = ReferenceForward(ref, model.loss_fn, cache=True)
    state = _state(model, batch)
    algo.apply(Event.BEFORE_FORWARD, state, _Logger())
    first = state.batch["ref_logprobs"]
    assert not first.requires_grad and first.shape == (*batch["input_ids"].shape, len(tokenizer))
    state2 = _state(model, batch)
    algo.apply(Event.BEFORE_FORWARD, state2, _Logger())
    assert algo.computed_rows == 3  # the second batch came from the cache
    valid = batch["attention_mask"].bool()
    assert torch.allclose(state2.batch["ref_logprobs"][valid], first[valid])
    assert algo.state_dict() == {}  # nothing of the reference reaches a checkpoint
    loss = model.loss(model(state2.batch), state2.batch)
    assert loss["kl"].item() > 0 and torch.isfinite(loss["total"])


def test_collate_is_picklable_for_workers(tokenizer):
    import pickle

    pickle.dumps(functools.partial(collate_examples, pad_id=tokenizer.pad_token_id))
