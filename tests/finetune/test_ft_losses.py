"""Every loss against hand-computed values; the loss registry resolves, plugs in and rejects."""

from __future__ import annotations

import math

import pytest
import torch

from finetune.errors import ConfigError
from finetune.losses import (
    LOSSES,
    CompositeLoss,
    DPOLoss,
    KLControlLoss,
    build_loss,
    dpo_losses,
    entropy,
    kl_divergence,
    masked_cross_entropy,
    sequence_logps,
)
from finetune.schedules import default_schedule

pytestmark = pytest.mark.train
LN2, LN3 = math.log(2), math.log(3)


def _lm_case():
    """B=1, L=3, V=2; learned labels at positions 1 (token 0) and 2 (token 1).

    Position 0 predicts token 0 with logits [0, 0]: p = 1/2. Position 1 predicts token 1 with
    logits [ln 3, 0]: p = 1/4. So CE = (ln 2 + ln 4) / 2 and the summed log-prob is −ln 8.
    """
    logits = torch.tensor([[[0.0, 0.0], [LN3, 0.0], [5.0, -5.0]]])
    labels = torch.tensor([[-100, 0, 1]])
    return logits, labels


def test_masked_cross_entropy_and_sequence_logps():
    logits, labels = _lm_case()
    assert masked_cross_entropy(logits, labels).item() == pytest.approx(1.5 * LN2)
    total, count = sequence_logps(logits, labels)
    assert total.item() == pytest.approx(-3 * LN2) and count.item() == 2
    assert masked_cross_entropy(logits, torch.full_like(labels, -100)).item() == 0.0


def test_kl_and_entropy_by_hand():
    logp = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
    logq = torch.log(torch.tensor([[[0.25, 0.75], [0.1, 0.9]]]))
    mask = torch.tensor([[1.0, 0.0]])  # the second position is not learned
    # KL([.5,.5] ‖ [.25,.75]) = .5 ln 2 + .5 ln(2/3) = .5 ln(4/3)
    assert kl_divergence(logp, logq, mask).item() == pytest.approx(0.5 * math.log(4 / 3))
    assert kl_divergence(logp, logp, torch.ones(1, 2)).item() == pytest.approx(0.0, abs=1e-7)
    assert entropy(torch.zeros(1, 2, 2), mask).item() == pytest.approx(LN2)


# Δ = (π_c − ref_c) − (π_r − ref_r) = (−1 + 2) − (−3 + 2.5) = 1.5; β = 0.1 so βΔ = 0.15
@pytest.mark.parametrize(
    ("kind", "smoothing", "expected"),
    [
        ("sigmoid", 0.0, math.log(1 + math.exp(-0.15))),  # −logσ(0.15)
        ("sigmoid", 0.1, 0.9 * math.log(1 + math.exp(-0.15)) + 0.1 * math.log(1 + math.exp(0.15))),
        ("hinge", 0.0, 0.85),  # relu(1 − 0.15)
        ("ipo", 0.0, (1.5 - 5.0) ** 2),  # (Δ − 1/(2β))²
    ],
)
def test_dpo_formulas(kind, smoothing, expected):
    t = torch.tensor
    got = dpo_losses(
        t([-1.0]), t([-3.0]), t([-2.0]), t([-2.5]), beta=0.1, kind=kind, label_smoothing=smoothing
    )
    assert got.item() == pytest.approx(expected)


def _pair_batch():
    """One row: chosen learns 2 tokens at p=1/2 each (sum −2 ln 2), rejected 1 token at p=1/4 (−2 ln 2)."""
    logits = torch.tensor(
        [[[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [LN3, 0.0], [0.0, 0.0]]]
    )
    labels = torch.tensor([[[-100, 0, 0], [-100, -100, 1]]])
    batch = {"labels": labels, "ref_logps": torch.tensor([[-1.0, -1.0]])}
    return {"logits": logits}, batch


def test_dpo_loss_sums_over_completion_and_ipo_normalises_by_length():
    outputs, batch = _pair_batch()
    # sigmoid: Δ = (−2ln2 + 1) − (−2ln2 + 1) = 0 → ln 2
    got = DPOLoss(beta=0.5, kind="sigmoid")(outputs, batch)
    assert got["total"].item() == pytest.approx(LN2)
    assert got["reward_margin"].item() == pytest.approx(0.0, abs=1e-6)
    # ipo: per-token averages: π_c = −ln2, π_r = −2ln2, ref_c = −1/2, ref_r = −1 → Δ = ln2 − 1/2
    got = DPOLoss(beta=0.5, kind="ipo")(outputs, batch)
    assert got["total"].item() == pytest.approx((LN2 - 0.5 - 1.0) ** 2)
    assert set(got) >= {
        "total",
        "dpo",
        "chosen_reward",
        "rejected_reward",
        "reward_margin",
        "reward_accuracy",
    }


def test_dpo_rejects_unknown_kind():
    with pytest.raises(ConfigError, match="unknown DPO kind 'kto'; known: sigmoid, hinge, ipo"):
        DPOLoss(kind="kto")


def test_kl_control_is_ce_plus_beta_kl():
    logits = torch.zeros(1, 3, 2)
    labels = torch.tensor([[-100, 0, 1]])
    ref = torch.log(torch.tensor([0.25, 0.75])).expand(1, 3, 2)
    got = KLControlLoss(beta=0.5)({"logits": logits}, {"labels": labels, "ref_logprobs": ref})
    kl = 0.5 * math.log(4 / 3)  # same at both learned positions
    assert got["lm"].item() == pytest.approx(LN2)
    assert got["kl"].item() == pytest.approx(kl)
    assert got["total"].item() == pytest.approx(LN2 + 0.5 * kl)


def test_confidence_penalty_is_ce_minus_beta_entropy():
    got = LOSSES.resolve("confidence_penalty")(beta=0.1)(
        {"logits": torch.zeros(1, 3, 2)}, {"labels": torch.tensor([[-100, 0, 1]])}
    )
    assert got["entropy"].item() == pytest.approx(LN2)
    assert got["total"].item() == pytest.approx(0.9 * LN2)


def _composite_case():
    outputs = {
        "logits": torch.zeros(1, 3, 2),
        "intent_logits": torch.zeros(1, 12),
        "tool_logits": torch.stack([torch.zeros(8), torch.full((8,), 50.0)]).unsqueeze(0),
        "cursor": torch.tensor([[1.0, 2.0, 0.0, 0.0]]),
        "reward_logits": torch.tensor([[0.0, 40.0]]),
    }
    batch = {
        "labels": torch.tensor([[-100, 0, 1]]),
        "intent": torch.tensor([3]),
        "intent_pos": torch.tensor([0]),
        "tool_label": torch.tensor([[2, -1]]),
        "tool_pos": torch.tensor([[1, 2]]),  # 2nd step missing
        "reward_label": torch.tensor([[1, 0]]),
        "reward_pos": torch.tensor([[1, -1]]),  # 2nd cut off
        "cursor_pos": torch.tensor([2]),
        "cursor_xy": torch.tensor([[100.0, 250.0]]),
        "placement": torch.tensor([0]),
    }
    return outputs, batch


def test_composite_components_and_weighted_total():
    outputs, batch = _composite_case()
    loss = CompositeLoss()
    got = loss(outputs, batch)
    cursor = (
        0.0 + 0.5 * 0.5**2
    ) / 2 + LN2  # Huber(δ=1) on (1−1, 2−2.5) in 100px units + placement CE
    assert got["code"].item() == pytest.approx(LN2)
    assert got["intent"].item() == pytest.approx(math.log(12))
    assert got["tool"].item() == pytest.approx(math.log(8))
    assert got["cursor"].item() == pytest.approx(cursor)
    assert got["reward"].item() == pytest.approx(LN2)  # masked steps do not count
    w = default_schedule(0)
    expected = (
        w.code * LN2 + w.intent * (math.log(12) + math.log(8)) + w.cursor * cursor + w.reward * LN2
    )
    assert got["total"].item() == pytest.approx(expected)
    loss.set_weights(default_schedule(10))
    w = default_schedule(10)
    expected = (
        w.code * LN2 + w.intent * (math.log(12) + math.log(8)) + w.cursor * cursor + w.reward * LN2
    )
    assert loss(outputs, batch)["total"].item() == pytest.approx(expected)


def test_loss_registry_builtins_plugin_and_unknown(tmp_path, monkeypatch):
    assert set(LOSSES.names()) == {
        "causal_lm",
        "composite",
        "kl_control",
        "confidence_penalty",
        "dpo",
    }
    assert isinstance(build_loss({"name": "dpo", "kind": "hinge"}, "composite"), DPOLoss)
    assert isinstance(build_loss({}, "composite"), CompositeLoss)
    (tmp_path / "my_losses.py").write_text(
        "class Doubled:\n"
        "    needs_reference = False\n"
        "    def __init__(self, factor=2.0):\n        self.factor = factor\n"
        "    def __call__(self, outputs, batch):\n"
        "        t = outputs['logits'].sum() * self.factor\n        return {'total': t, 'raw': t}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = build_loss({"name": "my_losses:Doubled", "factor": 3.0}, "composite")
    assert plugin({"logits": torch.ones(2)}, {})["total"].item() == 6.0
    with pytest.raises(ConfigError) as err:
        build_loss({"name": "focal"}, "composite")
    assert err.value.key == "loss.name"
    assert "known: causal_lm, composite, kl_control, confidence_penalty, dpo" in str(err.value)
    with pytest.raises(ConfigError, match="bad arguments for loss 'kl_control'"):
        build_loss({"name": "kl_control", "gamma": 1}, "composite")
