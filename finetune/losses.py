"""Losses by name. Each is called as ``loss(outputs, batch)`` and returns ``{'total': ..., <parts>}``;
Composer back-propagates ``total`` and logs every key as ``loss/train/<key>``.

``outputs`` is what ``AgentModel.forward`` returns: ``logits`` [N, L, V] and, for unpaired
batches, the head outputs. A loss that needs a frozen reference model says so with
``needs_reference = True`` and ``reference_outputs(ref_lm, batch)``; the ``ReferenceForward``
algorithm runs that under ``no_grad`` and puts the result in the batch, so the reference never
becomes part of the trained model or its checkpoint.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F

from finetune.errors import ConfigError
from finetune.examples import IGNORE
from finetune.registry import Registry
from finetune.schedules import CompositeWeights

Tensor = torch.Tensor
LOSSES: Registry[type] = Registry("loss", "loss.name", group="etai.losses")
DPO_KINDS = ("sigmoid", "hinge", "ipo")


# --- pure pieces, each tested against hand-computed values ---------------------------------


def _zero(like: Tensor) -> Tensor:
    return like.sum() * 0.0  # keeps the graph connected when a batch has nothing to learn


def shift(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Position t predicts token t+1."""
    return logits[..., :-1, :], labels[..., 1:]


def masked_cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean next-token CE over the tokens whose label is not IGNORE."""
    logits, labels = shift(logits, labels)
    count = (labels != IGNORE).sum()
    if count == 0:
        return _zero(logits)
    total = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        labels.reshape(-1),
        ignore_index=IGNORE,
        reduction="sum",
    )
    return total / count


def sequence_logps(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Sum of log p(token) over learned tokens per sequence, and their count (TRL's DPO input)."""
    logits, labels = shift(logits, labels)
    mask = labels != IGNORE
    logps = torch.log_softmax(logits.float(), dim=-1)
    picked = logps.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (picked * mask).sum(-1), mask.sum(-1)


def kl_divergence(logp: Tensor, logq: Tensor, mask: Tensor) -> Tensor:
    """Mean over masked positions of KL(p ‖ q) = Σ_v p(v) (log p(v) − log q(v))."""
    per_position = (logp.exp() * (logp - logq)).sum(-1)
    count = mask.sum()
    return (per_position * mask).sum() / count if count > 0 else _zero(per_position)


def entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Mean over masked positions of H(p) = −Σ_v p(v) log p(v)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    per_position = -(logp.exp() * logp).sum(-1)
    count = mask.sum()
    return (per_position * mask).sum() / count if count > 0 else _zero(per_position)


def dpo_losses(
    policy_chosen: Tensor,
    policy_rejected: Tensor,
    ref_chosen: Tensor,
    ref_rejected: Tensor,
    beta: float,
    kind: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Per-pair DPO losses with Δ = (π_c − ref_c) − (π_r − ref_r), as in TRL.

    sigmoid: −(1−ε)·logσ(βΔ) − ε·logσ(−βΔ)  (ε = label_smoothing; ε = 0 is plain DPO)
    hinge:   relu(1 − βΔ)
    ipo:     (Δ − 1/(2β))²  — the caller passes length-normalised log-probs (TRL does the same)
    """
    delta = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    if kind == "sigmoid":
        return -(1 - label_smoothing) * F.logsigmoid(beta * delta) - label_smoothing * F.logsigmoid(
            -beta * delta
        )
    if kind == "hinge":
        return torch.relu(1 - beta * delta)
    if kind == "ipo":
        return (delta - 1 / (2 * beta)) ** 2
    raise ConfigError("loss.kind", f"unknown DPO kind {kind!r}; known: {', '.join(DPO_KINDS)}")


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    count = mask.sum()
    return (values * mask).sum() / count if count > 0 else _zero(values)


def _classification(logits: Tensor, labels: Tensor, valid: Tensor) -> Tensor:
    per_item = F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),
        labels.clamp(min=0).reshape(-1),
        reduction="none",
    )
    return _masked_mean(per_item, valid.reshape(-1).float())


def _learned_positions(labels: Tensor) -> Tensor:
    return (labels[..., 1:] != IGNORE).float()  # aligned with logits[..., :-1, :]


# --- registered losses -------------------------------------------------------------------------


@LOSSES.register("causal_lm")
class CausalLMLoss:
    """Next-token CE over actions and the final answer."""

    needs_reference = False

    def __call__(self, outputs: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        lm = masked_cross_entropy(outputs["logits"], batch["labels"])
        return {"total": lm, "lm": lm}


@LOSSES.register("composite")
class CompositeLoss:
    """w_code·CE + w_intent·(intent CE + tool CE) + w_cursor·(Huber(xy) + placement CE) + w_reward·BCE.

    The tool-routing CE shares the intent weight: both are routing decisions read at markers, and
    the schedule in the issue has four weights. Cursor x, y are compared in units of
    ``cursor_scale_px`` so the Huber threshold means "one unit" rather than one pixel.
    Components are logged unweighted; the weights come from ``set_weights`` (an Algorithm).
    """

    needs_reference = False
    trains_heads = True  # what data.reward_rollouts needs (finetune.outcomes)

    def __init__(self, huber_delta: float = 1.0, cursor_scale_px: float = 100.0, **weights: float):
        self.huber_delta = huber_delta
        self.cursor_scale_px = cursor_scale_px
        try:
            self.weights = CompositeWeights(**weights)
        except TypeError as exc:
            raise ConfigError("loss", f"composite weights: {exc}") from None

    def set_weights(self, weights: CompositeWeights) -> None:
        self.weights = weights

    def components(self, outputs: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        parts = {"code": masked_cross_entropy(outputs["logits"], batch["labels"])}
        intent_ok = (batch["intent"] >= 0) & (batch["intent_pos"] >= 0)
        tool_ok = (batch["tool_label"] >= 0) & (batch["tool_pos"] >= 0)
        parts["intent"] = _classification(outputs["intent_logits"], batch["intent"], intent_ok)
        parts["tool"] = _classification(outputs["tool_logits"], batch["tool_label"], tool_ok)
        cursor = outputs["cursor"].float()
        cursor_ok = (batch["cursor_pos"] >= 0).float()
        huber = F.huber_loss(
            cursor[:, :2],
            batch["cursor_xy"].float() / self.cursor_scale_px,
            reduction="none",
            delta=self.huber_delta,
        ).mean(-1)
        placement_ok = (batch["placement"] >= 0) & (batch["cursor_pos"] >= 0)
        parts["cursor"] = _masked_mean(huber, cursor_ok) + _classification(
            cursor[:, 2:], batch["placement"], placement_ok
        )
        # Targets in [0, 1]: a step's success (1/0) or a rollout's scaled reward (finetune.outcomes)
        reward_ok = ((batch["reward_label"] >= 0) & (batch["reward_pos"] >= 0)).float()
        bce = F.binary_cross_entropy_with_logits(
            outputs["reward_logits"].float(),
            batch["reward_label"].clamp(min=0).float(),
            reduction="none",
        )
        parts["reward"] = _masked_mean(bce, reward_ok)
        return parts

    def __call__(self, outputs: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        p, w = self.components(outputs, batch), self.weights
        total = (
            w.code * p["code"]
            + w.intent * (p["intent"] + p["tool"])
            + w.cursor * p["cursor"]
            + w.reward * p["reward"]
        )
        return {"total": total, **p}

    def __repr__(self) -> str:
        return f"CompositeLoss({asdict(self.weights)})"


class _ReferenceLoss:
    """Shared by losses that compare against a frozen reference model."""

    needs_reference = True
    reference_keys: tuple[str, ...] = ()  # what reference_outputs adds to the batch
    reference_token_keys: tuple[str, ...] = ()  # those with a sequence axis (trimmed when cached)

    @staticmethod
    def _flat(batch: dict[str, Any], key: str) -> Tensor:
        value = batch[key]
        return value.reshape(-1, value.size(-1))  # [B, 2, L] pairs -> [2B, L]

    def _ref_logits(self, ref_lm: torch.nn.Module, batch: dict[str, Any]) -> Tensor:
        return ref_lm(
            input_ids=self._flat(batch, "input_ids"),
            attention_mask=self._flat(batch, "attention_mask"),
        ).logits


@LOSSES.register("kl_control")
class KLControlLoss(_ReferenceLoss):
    """CE + β·KL(current ‖ reference), the KL over the full vocabulary at the learned positions.

    ``ref_logprobs`` [B, L, V] comes from the batch; with a static dataset the ReferenceForward
    algorithm can cache it per example (memory: learned length × vocab × 4 bytes per example).
    """

    reference_keys = reference_token_keys = ("ref_logprobs",)

    def __init__(self, beta: float = 0.1):
        self.beta = beta

    def reference_outputs(
        self, ref_lm: torch.nn.Module, batch: dict[str, Any]
    ) -> dict[str, Tensor]:
        return {"ref_logprobs": torch.log_softmax(self._ref_logits(ref_lm, batch).float(), dim=-1)}

    def __call__(self, outputs: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        logits, labels = outputs["logits"], batch["labels"]
        ce = masked_cross_entropy(logits, labels)
        logp = torch.log_softmax(logits[..., :-1, :].float(), dim=-1)
        kl = kl_divergence(logp, batch["ref_logprobs"][..., :-1, :], _learned_positions(labels))
        return {"total": ce + self.beta * kl, "lm": ce, "kl": kl}


@LOSSES.register("confidence_penalty")
class ConfidencePenaltyLoss:
    """CE − β·H(p) at the learned positions (Pereyra et al., 2017): penalises over-confidence."""

    needs_reference = False

    def __init__(self, beta: float = 0.1):
        self.beta = beta

    def __call__(self, outputs: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        logits, labels = outputs["logits"], batch["labels"]
        ce = masked_cross_entropy(logits, labels)
        h = entropy(logits[..., :-1, :], _learned_positions(labels))
        return {"total": ce - self.beta * h, "lm": ce, "entropy": h}


@LOSSES.register("dpo")
class DPOLoss(_ReferenceLoss):
    """DPO on rows holding a (chosen, rejected) pair: ``input_ids`` [B, 2, L], index 0 chosen.

    Keeping the pair in one row means Composer's micro-batching (which splits dim 0) cannot
    separate them. Log-probs are summed over completion tokens; ``ref_logps`` [B, 2] comes from
    the batch (precomputed, or written by ReferenceForward).
    """

    paired = True
    reference_keys = ("ref_logps",)

    def __init__(self, beta: float = 0.1, kind: str = "sigmoid", label_smoothing: float = 0.0):
        if kind not in DPO_KINDS:
            raise ConfigError(
                "loss.kind", f"unknown DPO kind {kind!r}; known: {', '.join(DPO_KINDS)}"
            )
        self.beta, self.kind, self.label_smoothing = beta, kind, label_smoothing

    def reference_outputs(
        self, ref_lm: torch.nn.Module, batch: dict[str, Any]
    ) -> dict[str, Tensor]:
        logps, _ = sequence_logps(self._ref_logits(ref_lm, batch), self._flat(batch, "labels"))
        return {"ref_logps": logps.view(-1, 2)}

    def __call__(self, outputs: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        logps, counts = sequence_logps(outputs["logits"], self._flat(batch, "labels"))
        logps, counts = logps.view(-1, 2), counts.view(-1, 2).clamp(min=1)
        ref = batch["ref_logps"].to(logps.dtype)
        if self.kind == "ipo":  # IPO compares per-token averages (TRL, confirmed with the authors)
            pol, ref_n = logps / counts, ref / counts
        else:
            pol, ref_n = logps, ref
        losses = dpo_losses(
            pol[:, 0],
            pol[:, 1],
            ref_n[:, 0],
            ref_n[:, 1],
            self.beta,
            self.kind,
            self.label_smoothing,
        )
        chosen = self.beta * (logps[:, 0] - ref[:, 0]).detach()
        rejected = self.beta * (logps[:, 1] - ref[:, 1]).detach()
        return {
            "total": losses.mean(),
            "dpo": losses.mean(),
            "chosen_reward": chosen.mean(),
            "rejected_reward": rejected.mean(),
            "reward_margin": (chosen - rejected).mean(),
            "reward_accuracy": (chosen > rejected).float().mean(),
        }


def build_loss(section: dict[str, Any], default: str) -> Any:
    """``loss: {name: ..., <constructor kwargs>}`` -> a loss object."""
    kwargs = dict(section)
    name = kwargs.pop("name", default)
    cls = LOSSES.resolve(name)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError("loss", f"bad arguments for loss {name!r}: {exc}") from None
