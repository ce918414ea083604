"""The rebuild the FSDP export runs on rank 0 (``finetune.export.lm_from_state``): a model made on
the meta device takes the gathered weights strictly — a missing or unexpected key is an
ExportError naming it, never random weights written — and non-persistent buffers (RoPE's
inv_freq) come from the live model. The two-rank export itself is in test_fsdp.py."""

from __future__ import annotations

import pytest
import torch

from finetune.errors import ExportError
from finetune.export import lm_from_state
from finetune.lm import build_tiny

pytestmark = pytest.mark.train
IDS = torch.arange(1, 17).unsqueeze(0)


def _lm(arch: str):
    torch.manual_seed(0)
    return build_tiny({"arch": arch, "layers": 1, "heads": 2, "hidden": 32}, 64, 128).eval()


def _logits(lm) -> torch.Tensor:
    with torch.no_grad():
        return lm(input_ids=IDS, use_cache=False).logits


@pytest.mark.parametrize("arch", ["gpt2", "llama"])  # tied embeddings; RoPE buffers
def test_the_copy_holds_the_weights_and_buffers_it_was_given(arch):
    lm = _lm(arch)
    state = {k: v.clone() for k, v in lm.state_dict().items()}
    copy_ = lm_from_state(lm, state)
    assert torch.equal(_logits(copy_), _logits(lm))
    tensors = [*copy_.parameters(), *copy_.buffers()]
    assert {t.device.type for t in tensors} == {"cpu"}
    if arch == "gpt2":  # tie_weights ran after the strict load
        assert copy_.lm_head.weight is copy_.transformer.wte.weight
    else:
        assert copy_.model.rotary_emb.inv_freq.dtype == torch.float32


@pytest.mark.parametrize("change", ["drop", "add"])
def test_weights_that_do_not_fit_are_refused_by_name(change):
    lm = _lm("llama")
    state = dict(lm.state_dict())
    if change == "drop":
        del state["model.layers.0.mlp.up_proj.weight"]
        name = "model.layers.0.mlp.up_proj.weight"
    else:
        state["model.layers.0.extra.weight"] = torch.zeros(2)
        name = "model.layers.0.extra.weight"
    with pytest.raises(ExportError, match=name.replace(".", r"\.")):
        lm_from_state(lm, state)
