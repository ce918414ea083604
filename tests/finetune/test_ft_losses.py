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
    # epoch-0 weights of the default schedule, written out: code 0.8, intent 0.25, cursor 0.15,
    # reward 0.2 (finetune/schedules.py; the expected totals never come from the schedule itself)
    tool_intent = math.log(12) + math.log(8)
    expected = 0.8 * LN2 + 0.25 * tool_intent + 0.15 * cursor + 0.2 * LN2
    assert got["total"].item() == pytest.approx(expected)
    # epoch 10: code 0.8 - 0.02 * 10 = 0.6, intent 0.15, cursor 0.10, reward 0.25
    loss.set_weights(default_schedule(10))
    expected = 0.6 * LN2 + 0.15 * tool_intent + 0.10 * cursor + 0.25 * LN2
    assert loss(outputs, batch)["total"].item() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("epoch", "code", "cursor"),
    [(2, 0.76, 0.15), (3, 0.74, 0.10)],  # the cursor weight drops at epoch 3, not before or after
)
def test_composite_total_across_the_epoch_3_boundary(epoch, code, cursor):
    outputs, batch = _composite_case()
    loss = CompositeLoss()
    loss.set_weights(default_schedule(epoch))
    parts = (0.0 + 0.5 * 0.5**2) / 2 + LN2  # the cursor component, as above
    expected = code * LN2 + 0.25 * (math.log(12) + math.log(8)) + cursor * parts + 0.2 * LN2
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
    assert "known: causal_lm, composite, confidence_penalty, dpo, kl_control" in str(err.value)
    with pytest.raises(ConfigError, match="bad arguments for loss 'kl_control'"):
        build_loss({"name": "kl_control", "gamma": 1}, "composite")


# --- what the mutation run (scripts/mutation, #12) showed untested ----------------------------

LN43 = math.log(4 / 3)
# H([3/4, 1/4]) = −(3/4 ln 3/4 + 1/4 ln 1/4) = ln 4 − (3/4) ln 3
H34 = math.log(4) - 0.75 * LN3


def test_causal_lm_loss_is_the_masked_ce():
    logits, labels = _lm_case()
    got = LOSSES.resolve("causal_lm")()({"logits": logits}, {"labels": labels})
    assert got["total"].item() == pytest.approx(1.5 * LN2)
    assert got["lm"].item() == pytest.approx(1.5 * LN2)


def test_masked_cross_entropy_with_more_classes_than_positions():
    # V=3, 2 learned positions: label 2 under [0, 0, 0] (p = 1/3), label 0 under [ln 2, 0, 0]
    # (p = 2/4): CE = (ln 3 + ln 2) / 2
    logits = torch.tensor([[[0.0, 0.0, 0.0], [LN2, 0.0, 0.0], [9.0, 0.0, 0.0]]])
    labels = torch.tensor([[-100, 2, 0]])
    assert masked_cross_entropy(logits, labels).item() == pytest.approx((LN3 + LN2) / 2)


def test_sequence_logps_over_pairs_and_class_0():
    # [B=1, 2, L=3, V=2]: sequences along the last axis whatever the leading ones
    logits = torch.tensor(
        [[[[0.0, 0.0], [LN3, 0.0], [0.0, 0.0]], [[0.0, 0.0], [LN3, 0.0], [0.0, 0.0]]]]
    )
    labels = torch.tensor([[[-100, 0, 1], [-100, -100, 0]]])
    total, count = sequence_logps(logits, labels)
    # first: ln(1/2) + ln(1/4) = −3 ln 2 over 2 tokens; second: its last token, class 0 under
    # [ln 3, 0]: ln(3/4). (Learned positions (1, 1) and (0, 1): summed over the pair axis they
    # would be (1, 2), not (2, 1).)
    torch.testing.assert_close(total, torch.tensor([[-3 * LN2, math.log(0.75)]]))
    assert count.tolist() == [[2, 1]]


def test_kl_and_entropy_with_nothing_learned_are_zero_not_nan():
    logp = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
    assert kl_divergence(logp, logp.flip(-1), torch.zeros(1, 2)).item() == 0.0
    assert entropy(torch.zeros(1, 2, 2), torch.zeros(1, 2)).item() == 0.0


def test_entropy_is_over_the_vocabulary_of_each_position():
    logits = torch.tensor([[[LN3, 0.0], [0.0, 0.0], [0.0, 0.0]]])  # L=3, V=2
    assert entropy(logits, torch.tensor([[1.0, 0.0, 0.0]])).item() == pytest.approx(H34)
    assert entropy(logits, torch.tensor([[1.0, 1.0, 0.0]])).item() == pytest.approx((H34 + LN2) / 2)


def test_dpo_losses_defaults_and_unknown_kind():
    t = torch.tensor
    # sigmoid without smoothing by default: βΔ = 0.1 * 1.5 → −logσ(0.15)
    got = dpo_losses(t([-1.0]), t([-3.0]), t([-2.0]), t([-2.5]), beta=0.1)
    assert got.item() == pytest.approx(math.log(1 + math.exp(-0.15)))
    with pytest.raises(ConfigError) as err:
        dpo_losses(t([0.0]), t([0.0]), t([0.0]), t([0.0]), beta=0.1, kind="kto")
    assert err.value.key == "loss.kind"
    assert err.value.message == "unknown DPO kind 'kto'; known: sigmoid, hinge, ipo"


def _pair_batch_b2():
    """Two rows: A = _pair_batch with ref (−3, −1), B = _pair_batch with ref (−1, −1).

    Policy sums: chosen −2 ln 2 (2 tokens), rejected −2 ln 2 (1 token), in both rows.
    """
    outputs, batch = _pair_batch()
    logits = torch.cat([outputs["logits"], outputs["logits"]])
    labels = torch.cat([batch["labels"], batch["labels"]])
    ref = torch.tensor([[-3.0, -1.0], [-1.0, -1.0]])
    return {"logits": logits}, {"labels": labels, "ref_logps": ref}


def test_dpo_rewards_by_hand():
    # the survivors: a flipped reward_accuracy and a wrong reference in chosen_reward
    outputs, batch = _pair_batch()
    batch["ref_logps"] = torch.tensor([[-3.0, -1.0]])
    got = DPOLoss(beta=0.5)(outputs, batch)
    # chosen: 0.5 (−2 ln 2 + 3) = 1.5 − ln 2; rejected: 0.5 (−2 ln 2 + 1) = 0.5 − ln 2
    assert got["chosen_reward"].item() == pytest.approx(1.5 - LN2)
    assert got["rejected_reward"].item() == pytest.approx(0.5 - LN2)
    assert got["reward_margin"].item() == pytest.approx(1.0)
    assert got["reward_accuracy"].item() == 1.0  # chosen above rejected
    # Δ = 2, βΔ = 1: −logσ(1)
    assert got["total"].item() == pytest.approx(math.log(1 + math.exp(-1)))
    assert got["dpo"].item() == pytest.approx(math.log(1 + math.exp(-1)))
    # rejected above chosen: accuracy 0
    batch["ref_logps"] = torch.tensor([[-1.0, -3.0]])
    assert DPOLoss(beta=0.5)(outputs, batch)["reward_accuracy"].item() == 0.0
    # a tie is not accurate (TRL counts chosen > rejected only)
    batch["ref_logps"] = torch.tensor([[-1.0, -1.0]])
    assert DPOLoss(beta=0.5)(outputs, batch)["reward_accuracy"].item() == 0.0
    # policy log-probs that differ: chosen learns 1 token at 1/2 (−ln 2),
    # rejected 1 token at 1/4 (−2 ln 2)
    logits = torch.tensor([[[0.0, 0.0]] * 3, [[0.0, 0.0], [LN3, 0.0], [0.0, 0.0]]])
    batch = {
        "labels": torch.tensor([[[-100, -100, 0], [-100, -100, 1]]]),
        "ref_logps": torch.tensor([[-1.0, -1.0]]),
    }
    got = DPOLoss(beta=1.0)({"logits": logits}, batch)
    assert got["chosen_reward"].item() == pytest.approx(1 - LN2)
    assert got["rejected_reward"].item() == pytest.approx(1 - 2 * LN2)
    assert got["reward_accuracy"].item() == 1.0


def test_dpo_over_two_rows_averages_per_pair():
    outputs, batch = _pair_batch_b2()
    got = DPOLoss(beta=0.5)(outputs, batch)
    # rewards: A (1.5 − ln 2, 0.5 − ln 2); B (0.5 − ln 2, 0.5 − ln 2)
    assert got["chosen_reward"].item() == pytest.approx(1.0 - LN2)
    assert got["rejected_reward"].item() == pytest.approx(0.5 - LN2)
    assert got["reward_margin"].item() == pytest.approx(0.5)
    assert got["reward_accuracy"].item() == 0.5
    # sigmoid: A Δ = 2 → −logσ(1); B Δ = 0 → ln 2
    assert got["total"].item() == pytest.approx((math.log(1 + math.exp(-1)) + LN2) / 2)
    # ipo on per-token averages: π_c = −ln 2, π_r = −2 ln 2; A ref (−1.5, −1) → Δ = ln 2 + 0.5;
    # B ref (−0.5, −1) → Δ = ln 2 − 0.5; loss (Δ − 1/(2β))² = (Δ − 1)²
    got = DPOLoss(beta=0.5, kind="ipo")(outputs, batch)
    assert got["total"].item() == pytest.approx(((LN2 - 0.5) ** 2 + (LN2 - 1.5) ** 2) / 2)


def test_dpo_defaults_smoothing_and_a_float64_reference():
    outputs, batch = _pair_batch()
    batch["ref_logps"] = torch.tensor([[-3.0, -1.0]])
    # defaults: β = 0.1, sigmoid, no smoothing: Δ = 2 → −logσ(0.2); chosen reward 0.1 (3 − 2 ln 2)
    got = DPOLoss()(outputs, batch)
    assert got["total"].item() == pytest.approx(math.log(1 + math.exp(-0.2)))
    assert got["chosen_reward"].item() == pytest.approx(0.1 * (3 - 2 * LN2))
    # smoothing ε = 0.2 at βΔ = 1: 0.8 (−logσ(1)) + 0.2 (−logσ(−1))
    got = DPOLoss(beta=0.5, label_smoothing=0.2)(outputs, batch)
    assert got["total"].item() == pytest.approx(
        0.8 * math.log(1 + math.exp(-1)) + 0.2 * math.log(1 + math.exp(1))
    )
    # a reference stored as float64 is read in the policy's dtype (the loss stays float32)
    batch["ref_logps"] = batch["ref_logps"].double()
    got = DPOLoss(beta=0.5)(outputs, batch)
    assert got["total"].dtype == torch.float32 and got["chosen_reward"].dtype == torch.float32
    with pytest.raises(ConfigError) as err:
        DPOLoss(kind="kto")
    assert err.value.key == "loss.kind"


class FakeLM(torch.nn.Module):
    """A reference model whose logits depend only on the token: 0 → [ln 3, 0], 1 → [0, 0]."""

    TABLE = torch.tensor([[LN3, 0.0], [0.0, 0.0]])

    def forward(self, input_ids, attention_mask):
        self.seen = (input_ids.clone(), attention_mask.clone())
        return type("Out", (), {"logits": self.TABLE[input_ids]})()


def test_dpo_reference_outputs_by_hand():
    # [B=2, 2, L=3]; the second row is the first with chosen and rejected swapped
    ids = torch.tensor([[[0, 0, 1], [1, 1, 0]], [[1, 1, 0], [0, 0, 1]]])
    mask = torch.tensor([[[1, 1, 1], [1, 1, 0]], [[1, 1, 0], [1, 1, 1]]])
    labels = torch.tensor([[[-100, 0, 1], [-100, -100, 0]], [[-100, -100, 0], [-100, 0, 1]]])
    lm = FakeLM()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    got = DPOLoss().reference_outputs(lm, batch)
    # (0 0 1): token 0 after 0 (3/4), token 1 after 0 (1/4) → ln(3/16); (1 1 0): 0 after 1 → ln(1/2)
    a, b = math.log(3 / 16), -LN2
    torch.testing.assert_close(got["ref_logps"], torch.tensor([[a, b], [b, a]]))
    assert lm.seen[0].tolist() == ids.reshape(4, 3).tolist()  # pairs flattened to [2B, L]
    assert lm.seen[1].tolist() == mask.reshape(4, 3).tolist()


def test_kl_reference_outputs_are_the_reference_log_probs():
    ids = torch.tensor([[0, 1, 0]])
    mask = torch.tensor([[1, 1, 0]])
    lm = FakeLM()
    got = KLControlLoss().reference_outputs(lm, {"input_ids": ids, "attention_mask": mask})
    q0, q1 = [math.log(0.75), math.log(0.25)], [-LN2, -LN2]
    torch.testing.assert_close(got["ref_logprobs"], torch.tensor([[q0, q1, q0]]))
    assert lm.seen[0].tolist() == [[0, 1, 0]] and lm.seen[1].tolist() == [[1, 1, 0]]


def _varied_lm_case():
    """L=4, V=2; learned: position 0 → class 0 under [ln 3, 0] (3/4), position 1 → class 1
    under [0, 0] (1/2), position 2 → class 1 under [0, ln 3] (3/4); position 3 predicts nothing."""
    logits = torch.tensor([[[LN3, 0.0], [0.0, 0.0], [0.0, LN3], [5.0, -5.0]]])
    labels = torch.tensor([[-100, 0, 1, 1]])
    return logits, labels


def test_kl_control_by_position():
    logits, labels = _varied_lm_case()
    # the reference differs by position: [1/2, 1/2], [1/4, 3/4], [1/2, 1/2], then unused
    ref = torch.log(torch.tensor([[[0.5, 0.5], [0.25, 0.75], [0.5, 0.5], [0.9, 0.1]]]))
    got = KLControlLoss()({"logits": logits}, {"labels": labels, "ref_logprobs": ref})
    ce = (2 * LN43 + LN2) / 3
    # KL([3/4, 1/4] ‖ uniform) = ln 2 − H34 at positions 0 and 2; KL([1/2, 1/2] ‖ [1/4, 3/4])
    # = ½ ln 2 + ½ ln(2/3) = ½ ln(4/3) at position 1
    kl = (2 * (LN2 - H34) + 0.5 * LN43) / 3
    assert got["lm"].item() == pytest.approx(ce)
    assert got["kl"].item() == pytest.approx(kl)
    assert got["total"].item() == pytest.approx(ce + 0.1 * kl)  # β = 0.1 by default


def test_confidence_penalty_by_position():
    logits, labels = _varied_lm_case()
    got = LOSSES.resolve("confidence_penalty")()({"logits": logits}, {"labels": labels})
    ce, h = (2 * LN43 + LN2) / 3, (2 * H34 + LN2) / 3
    assert got["lm"].item() == pytest.approx(ce)
    assert got["entropy"].item() == pytest.approx(h)
    assert got["total"].item() == pytest.approx(ce - 0.1 * h)  # β = 0.1 by default


def _composite_masks_case():
    """Two rows whose labels and positions are valid at 0 and masked in every other way."""
    outputs = {
        "logits": torch.zeros(2, 3, 2),
        "intent_logits": torch.tensor([[LN2, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        "tool_logits": torch.tensor(
            [[[LN2, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]
        ),
        "cursor": torch.tensor([[1.0, 2.0, LN3, 0.0], [0.0, 0.0, 0.0, 0.0]]),
        "reward_logits": torch.tensor([[LN3, LN3], [0.0, 0.0]]),
    }
    batch = {
        "labels": torch.tensor([[-100, 0, 1], [-100, -100, 1]]),
        "intent": torch.tensor([0, 2]),
        "intent_pos": torch.tensor([0, -1]),  # row 1: a label but no marker
        "tool_label": torch.tensor([[0, 1], [-1, 2]]),
        # row 1: a marker without a label, then a label without a marker
        "tool_pos": torch.tensor([[0, 3], [2, -1]]),
        "cursor_pos": torch.tensor([0, -1]),
        "cursor_xy": torch.tensor([[100.0, 400.0], [0.0, 0.0]]),
        "placement": torch.tensor([0, 1]),
        "reward_label": torch.tensor([[0, 1], [1, -1]]),
        "reward_pos": torch.tensor([[0, 5], [-1, 3]]),
    }
    return outputs, batch


def test_composite_masks_and_class_0():
    outputs, batch = _composite_masks_case()
    got = CompositeLoss()(outputs, batch)
    assert got["code"].item() == pytest.approx(LN2)
    assert got["intent"].item() == pytest.approx(LN2)  # class 0 under [ln 2, 0, 0]: p = 1/2
    assert got["tool"].item() == pytest.approx((LN2 + LN3) / 2)  # the two valid steps of row 0
    # row 0: (x, y) = (1, 2) vs (100, 400) px / 100 = (1, 4): Huber(δ=1) of (0, 2) = (0, 1.5),
    # mean 0.75; placement class 0 under [ln 3, 0]: ln(4/3). Row 1 has no cursor.
    assert got["cursor"].item() == pytest.approx(0.75 + LN43)
    # row 0: label 0 under logit ln 3 (σ = 3/4): −ln(1/4); label 1 under ln 3: −ln(3/4)
    assert got["reward"].item() == pytest.approx((math.log(4) + LN43) / 2)
    expected = (
        0.8 * LN2
        + 0.25 * (LN2 + (LN2 + LN3) / 2)
        + 0.15 * (0.75 + LN43)
        + 0.2 * (math.log(4) + LN43) / 2
    )
    assert got["total"].item() == pytest.approx(expected)


def test_composite_huber_delta():
    outputs, batch = _composite_masks_case()
    # δ = 2: the error of 2 is inside the quadratic zone: ½ · 2² = 2, mean over (x, y) 1.0
    got = CompositeLoss(huber_delta=2.0)(outputs, batch)
    assert got["cursor"].item() == pytest.approx(1.0 + LN43)
    # cursor_scale_px = 200: targets (0.5, 2): errors (0.5, 0) → ½ · 0.25 = 0.125, mean 0.0625
    got = CompositeLoss(cursor_scale_px=200.0)(outputs, batch)
    assert got["cursor"].item() == pytest.approx(0.0625 + LN43)


def test_composite_with_nothing_to_learn_is_zero_not_nan():
    outputs, batch = _composite_masks_case()
    for key in ("intent_pos", "tool_pos", "cursor_pos", "reward_pos"):
        batch[key] = torch.full_like(batch[key], -1)  # no marker anywhere
    got = CompositeLoss()(outputs, batch)
    assert [got[k].item() for k in ("intent", "tool", "cursor", "reward")] == [0.0, 0.0, 0.0, 0.0]
    assert got["total"].item() == pytest.approx(0.8 * LN2)  # the code CE alone


def test_composite_rejects_unknown_weights_and_shows_its_weights():
    with pytest.raises(ConfigError) as err:
        CompositeLoss(style=1.0)
    assert err.value.key == "loss" and err.value.message.startswith("composite weights: ")
    assert "style" in err.value.message
    assert repr(CompositeLoss()) == (
        "CompositeLoss({'code': 0.8, 'intent': 0.25, 'cursor': 0.15, 'reward': 0.2})"
    )
    with pytest.raises(ConfigError) as err:
        build_loss({"name": "kl_control", "gamma": 1}, "composite")
    assert err.value.key == "loss"
