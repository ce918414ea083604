"""The agent model: any HF causal LM plus four heads read at ETAI marker positions.

Heads (on the last hidden state):
  intent  at <TRACE_START>: 2-layer MLP -> 12 intent logits
  tool    at each <TOOL>:   linear -> logits over the tool registry (routing)
  reward  at each <RESULT>: linear -> logit that the step's execution succeeds
  cursor  at <OUTPUT>:      linear -> (x, y) in units of cursor_scale_px, then before/after logits

Routing (``route_tools``) is what a constrained decoder uses: tools the predicted intent does
not allow get −inf, and the ToolFailureMask bias (a buffer) is added. The training loss sees the
raw tool logits, so the head never learns to cancel the bias.
"""

from __future__ import annotations

from typing import Any

import torch
from composer.models import ComposerModel
from torch import nn

from harness.session.intents import ALLOWED_TOOLS, INTENTS
from harness.tools import tool_names

HEAD_NAMES = ("intent", "tool", "reward", "cursor")
DEFAULT_HEAD_LRS = {"intent": 1e-4, "tool": 5e-5, "reward": 2e-5, "cursor": 3e-5}


def allowed_tool_matrix(
    intents: tuple[str, ...] = INTENTS, tools: tuple[str, ...] = tool_names()
) -> torch.Tensor:
    """[n_intents, n_tools] booleans from harness.session.intents.ALLOWED_TOOLS."""
    return torch.tensor([[t in ALLOWED_TOOLS[i] for t in tools] for i in intents], dtype=torch.bool)


def route_tools(
    tool_logits: torch.Tensor,
    intent_logits: torch.Tensor,
    allowed: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Tool logits [B, S, T] for decoding: + bias, and −inf where the argmax intent forbids the tool."""
    mask = allowed[intent_logits.argmax(-1)]  # [B, T]
    logits = tool_logits + (bias if bias is not None else 0)
    return logits.masked_fill(~mask.unsqueeze(1), float("-inf"))


def _gather(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """hidden [B, L, H], positions [B, S] (−1 = missing, read as 0 and masked by the loss) -> [B, S, H]."""
    index = positions.clamp(min=0).unsqueeze(-1).expand(-1, -1, hidden.size(-1))
    return hidden.gather(1, index)


class BlockPolicy:
    """``module -> bool``: True for the LM's transformer blocks (the classes HF marks as not
    splittable, ``_no_split_modules``). A plain callable, not a bound method, so the LM does not
    hold a reference to the AgentModel (deep copies and pickles of the LM stay the LM alone)."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def __call__(self, module: nn.Module) -> bool:
        return type(module).__name__ in self.names


def block_policy(lm: nn.Module) -> BlockPolicy:
    names = frozenset(getattr(lm, "_no_split_modules", None) or ())
    if not names:
        raise ValueError(f"{type(lm).__name__} names no transformer block (_no_split_modules)")
    return BlockPolicy(names)


def check_master_weights(model: nn.Module) -> None:
    """Refuse trainable parameters that are not fp32.

    The optimizer updates the parameters it is given; bf16 ones have no fp32 master copy, and at
    lr 2e-5 most updates are below bf16's resolution and round to nothing. bf16 compute comes from
    ``train.precision: amp_bf16`` (under FSDP: mixed precision casts the fp32 shards for compute).
    Frozen low-precision weights (a LoRA or 4-bit base) are fine.
    """
    low = sorted(
        {str(p.dtype) for p in model.parameters() if p.requires_grad and p.dtype != torch.float32}
    )
    if low:
        raise ValueError(
            f"trainable parameters in {', '.join(low)} would be updated without an fp32 master "
            "copy; leave model.dtype out (fp32 weights) and set train.precision: amp_bf16 for "
            "bf16 compute"
        )


class AgentModel(ComposerModel):
    def __init__(self, lm: nn.Module, tokenizer: Any, loss_fn: Any, hidden_size: int | None = None):
        super().__init__()
        # Composer's FSDP wraps each child of this model on its own and asks *that child* for
        # fsdp_wrap_fn / activation_checkpointing_fn: the policy must live on the LM, or the
        # whole LM becomes one FSDP unit without checkpointing.
        lm.fsdp_wrap_fn = lm.activation_checkpointing_fn = block_policy(lm)
        self.lm = lm
        self.tokenizer = tokenizer
        self.loss_fn = loss_fn
        h = hidden_size or lm.config.hidden_size
        self.intent_head = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.Linear(h, len(INTENTS)))
        self.tool_head = nn.Linear(h, len(tool_names()))
        self.reward_head = nn.Linear(h, 1)
        self.cursor_head = nn.Linear(h, 4)
        # Persistent: the bias learned from execution results is part of the checkpoint.
        self.register_buffer("tool_bias", torch.zeros(len(tool_names())))
        self.register_buffer("allowed_tools", allowed_tool_matrix(), persistent=False)

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        ids, mask = batch["input_ids"], batch["attention_mask"]
        paired = ids.dim() == 3  # DPO rows [B, 2, L]: the heads are not trained there
        if paired:
            ids, mask = ids.reshape(-1, ids.size(-1)), mask.reshape(-1, mask.size(-1))
        with_heads = not paired and "intent_pos" in batch
        # No KV cache in a training forward: with activation checkpointing the recomputation
        # would append to the cache the first pass filled (keys twice as long as the mask).
        out = self.lm(
            input_ids=ids, attention_mask=mask, output_hidden_states=with_heads, use_cache=False
        )
        outputs = {"logits": out.logits}
        if with_heads:
            hidden = out.hidden_states[-1]
            # The buffers belong to this model, not to a child: FSDP (which moves only the children
            # it wraps) leaves them where they were built. Read them where the hidden states are.
            allowed, bias = (b.to(hidden.device) for b in (self.allowed_tools, self.tool_bias))
            outputs["intent_logits"] = self.intent_head(
                _gather(hidden, batch["intent_pos"].unsqueeze(1)).squeeze(1)
            )
            outputs["tool_logits"] = self.tool_head(_gather(hidden, batch["tool_pos"]))
            outputs["reward_logits"] = self.reward_head(
                _gather(hidden, batch["reward_pos"])
            ).squeeze(-1)
            outputs["cursor"] = self.cursor_head(
                _gather(hidden, batch["cursor_pos"].unsqueeze(1)).squeeze(1)
            )
            outputs["routed_tool_logits"] = route_tools(
                outputs["tool_logits"].detach(),
                outputs["intent_logits"].detach(),
                allowed,
                bias,
            )
        return outputs

    def loss(
        self, outputs: dict[str, torch.Tensor], batch: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        return self.loss_fn(outputs, batch)

    def heads(self) -> dict[str, nn.Module]:
        return {
            "intent": self.intent_head,
            "tool": self.tool_head,
            "reward": self.reward_head,
            "cursor": self.cursor_head,
        }

    def param_groups(
        self, lm_lr: float, head_lrs: dict[str, float] | None = None
    ) -> list[dict[str, Any]]:
        """One optimizer group for the LM (trainable params only, e.g. LoRA) and one per head."""
        lrs = {**DEFAULT_HEAD_LRS, **(head_lrs or {})}
        groups = [{"params": [p for p in self.lm.parameters() if p.requires_grad], "lr": lm_lr}]
        groups += [
            {"params": list(head.parameters()), "lr": lrs[name]}
            for name, head in self.heads().items()
        ]
        return groups
