"""Composer Algorithms of the fine-tuning stack (they run before callbacks and may change State).

- LossWeightSchedule: pushes the epoch's composite weights into the loss (the loss never sees State).
- ToolFailureMask: per-tool failure rates from execution results -> a bounded additive bias on
  the tool-routing logits.
- SequenceLengthWarmup: short sequences first; unlike Composer's own it knows our head positions.
- ReferenceForward: runs the frozen reference model for losses that need it, kept outside the model.
- GlobalGradientClipping: one norm over every parameter, also when FSDP made several roots.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
from composer.core import Algorithm, Event, State, get_precision_context
from composer.loggers import Logger
from composer.utils import dist

from finetune.examples import MISSING
from finetune.schedules import SCHEDULES, CompositeWeights
from harness.tools import tool_names


def unwrap(model: Any) -> Any:
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


class LossWeightSchedule(Algorithm):
    """Sets ``loss.set_weights(schedule(epoch))`` at every batch start.

    Applied every batch (cheap) rather than at EPOCH_START so a run resumed mid-epoch gets the
    right weights at once; the epoch comes from the checkpointed timestamp, so a resumed run
    continues the same schedule. Logs ``loss_weights/<name>`` when the epoch changes.
    """

    def __init__(self, schedule: str = "default"):
        self.schedule_name = schedule
        self.schedule = SCHEDULES.resolve(schedule)
        self.epoch: int | None = None
        self.weights: CompositeWeights | None = None
        self._logged_epoch: int | None = None

    def match(self, event: Event, state: State) -> bool:
        return event in (Event.FIT_START, Event.BATCH_START)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        self.epoch = int(state.timestamp.epoch)
        self.weights = self.schedule(self.epoch)
        unwrap(state.model).loss_fn.set_weights(self.weights)
        if self._logged_epoch != self.epoch:
            logger.log_metrics({f"loss_weights/{k}": v for k, v in asdict(self.weights).items()})
            self._logged_epoch = self.epoch

    def state_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule_name,
            "epoch": self.epoch,
            "weights": asdict(self.weights) if self.weights else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = state.get("epoch")
        self.weights = CompositeWeights(**state["weights"]) if state.get("weights") else None


class ToolFailureMask(Algorithm):
    """Keeps per-tool failure rates from the execution results in the training batches and sets

        bias_t = −max_bias · (failures_t + prior/2) / (calls_t + prior)   ∈ [−max_bias, 0]

    on the model's ``tool_bias`` buffer, which ``route_tools`` adds to the tool-routing logits.
    That is all it does: a bounded additive bias, not a hard mask, and the training loss does not
    see it. A call counts as failed when its step's reward label is 0 (e.g. a non-zero exit code).
    Counts are summed over ranks, so every rank routes with the same bias.
    """

    def __init__(self, max_bias: float = 1.0, prior: float = 1.0):
        self.max_bias, self.prior = max_bias, prior
        self.failures = torch.zeros(len(tool_names()), dtype=torch.float64)
        self.calls = torch.zeros(len(tool_names()), dtype=torch.float64)

    def match(self, event: Event, state: State) -> bool:
        return event == Event.AFTER_DATALOADER and "tool_label" in state.batch

    def bias(self) -> torch.Tensor:
        rate = (self.failures + self.prior / 2) / (self.calls + self.prior)
        return (-self.max_bias * rate).float()

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        tools = state.batch["tool_label"].reshape(-1).cpu()
        ok = state.batch["reward_label"].reshape(-1).cpu()
        valid = (tools >= 0) & (ok >= 0)
        n = len(tool_names())
        delta = torch.stack(
            [
                torch.bincount(tools[valid], minlength=n).double(),
                torch.bincount(tools[valid & (ok == 0)], minlength=n).double(),
            ]
        )
        delta = state.device.tensor_to_device(delta)
        dist.all_reduce(delta, reduce_operation="SUM")
        self.calls += delta[0].cpu()
        self.failures += delta[1].cpu()
        model = unwrap(state.model)
        model.tool_bias.copy_(self.bias().to(model.tool_bias.device))

    def state_dict(self) -> dict[str, Any]:
        return {"failures": self.failures.tolist(), "calls": self.calls.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.failures = torch.tensor(state["failures"], dtype=torch.float64)
        self.calls = torch.tensor(state["calls"], dtype=torch.float64)


def global_grad_norm(model: torch.nn.Module) -> torch.Tensor:
    """The L2 norm of every gradient of ``model``, over all ranks' shards (collective under FSDP).

    Composer's FSDP wraps each child of the AgentModel (the LM and each head) as its own FSDP
    root; each root's ``clip_grad_norm_`` sees only its own parameters. Asked with an infinite
    threshold it only measures (the clip coefficient clamps to 1); the roots' norms combine here.
    """
    import math

    from torch.distributed.fsdp import FullyShardedDataParallel

    roots = [
        m for m in model.modules() if isinstance(m, FullyShardedDataParallel) and m.check_is_root()
    ]
    inside = {id(p) for r in roots for p in r.parameters()}
    loose = [p.grad for p in model.parameters() if id(p) not in inside and p.grad is not None]
    squares = [torch.linalg.vector_norm(g.detach().float()) ** 2 for g in loose]
    squares += [r.clip_grad_norm_(math.inf).float() ** 2 for r in roots]
    if not squares:
        return torch.zeros(())
    return torch.stack([s.cpu() for s in squares]).sum().sqrt()


class GlobalGradientClipping(Algorithm):
    """Scales every gradient by ``min(1, threshold / global_norm)`` after the backward passes.

    Composer's ``GradientClipping`` clips each FSDP root on its own, so with an LM and four heads
    the update can be up to √5 times the threshold and the heads' share changes with the LM's
    norm. Logs ``grad_norm/global`` (before clipping).
    """

    def __init__(self, threshold: float):
        if not threshold > 0:
            raise ValueError(f"clipping threshold must be positive, got {threshold}")
        self.threshold = float(threshold)

    def match(self, event: Event, state: State) -> bool:
        return event == Event.AFTER_TRAIN_BATCH

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        norm = global_grad_norm(state.model)
        coef = min(1.0, self.threshold / (float(norm) + 1e-6))
        if coef < 1.0:
            for p in state.model.parameters():
                if p.grad is not None:
                    p.grad.mul_(coef)
        logger.log_metrics({"grad_norm/global": float(norm)})


_POSITION_KEYS = ("intent_pos", "tool_pos", "reward_pos", "cursor_pos")
_SEQUENCE_KEYS = ("input_ids", "attention_mask", "labels")


def warmup_length(elapsed: float, duration: float, min_len: int, max_len: int, step: int) -> int:
    """Linear from min_len to max_len over the first ``duration`` of training, in multiples of step."""
    frac = 1.0 if duration <= 0 else min(max(elapsed / duration, 0.0), 1.0)
    length = min_len + (max_len - min_len) * frac
    return int(max(min_len, min(max_len, (length // step) * step)))


class SequenceLengthWarmup(Algorithm):
    """Truncates batches to a growing length; head positions cut off become MISSING.

    Composer's SeqLengthWarmup needs a HuggingFaceModel and all-2-D batches; ours has neither.
    """

    def __init__(
        self, duration: float = 0.3, min_seq_len: int = 64, max_seq_len: int = 8192, step: int = 8
    ):
        self.duration, self.min_seq_len, self.max_seq_len, self.step = (
            duration,
            min_seq_len,
            max_seq_len,
            step,
        )

    def match(self, event: Event, state: State) -> bool:
        return event == Event.AFTER_DATALOADER

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        elapsed = state.get_elapsed_duration()
        length = warmup_length(
            float(elapsed.value) if elapsed is not None else 1.0,
            self.duration,
            self.min_seq_len,
            self.max_seq_len,
            self.step,
        )
        batch = state.batch
        for key in _SEQUENCE_KEYS:
            if key in batch:
                batch[key] = batch[key][..., :length].contiguous()
        for key in _POSITION_KEYS:
            if key in batch:
                batch[key] = batch[key].masked_fill(batch[key] >= length, MISSING)
        logger.log_metrics({"seq_length_warmup/seq_len": length})


class ReferenceForward(Algorithm):
    """Runs the frozen reference LM before each forward and adds ``loss.reference_outputs`` to the batch.

    The reference lives here, not in the trained model, so it is neither optimised nor written to
    checkpoints (``state_dict`` is empty). With ``cache=True`` results are kept per example
    (uid, length): valid for a static dataset and a frozen reference. Batches that already carry
    the outputs (precomputed columns) are left alone.
    """

    def __init__(self, ref_lm: torch.nn.Module, loss: Any, cache: bool = False):
        self.ref_lm = ref_lm.eval().requires_grad_(False)
        self.loss = loss
        self.cache_enabled = cache
        self._cache: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
        self.computed_rows = 0  # rows run through the reference, for tests and logs

    def match(self, event: Event, state: State) -> bool:
        return event in (Event.FIT_START, Event.BEFORE_FORWARD)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        if event == Event.FIT_START:
            state.device.module_to_device(self.ref_lm)
            return
        batch = state.batch
        if all(k in batch for k in self.loss.reference_keys):
            return
        rows = self._row_keys(batch)
        if self.cache_enabled and rows and all(r in self._cache for r in rows):
            batch.update(self._from_cache(rows, batch))
            return
        with torch.no_grad(), get_precision_context(state.precision, state.precision_config):
            outputs = self.loss.reference_outputs(self.ref_lm, batch)
        self.computed_rows += len(rows)
        if self.cache_enabled:
            self._store(rows, outputs)
        batch.update(outputs)

    @staticmethod
    def _row_keys(batch: dict[str, Any]) -> list[tuple[int, int]]:
        lengths = batch["attention_mask"].reshape(len(batch["uid"]), -1).sum(-1)
        return list(zip(batch["uid"].tolist(), lengths.tolist()))

    def _store(self, rows: list[tuple[int, int]], outputs: dict[str, torch.Tensor]) -> None:
        token_keys = getattr(self.loss, "reference_token_keys", ())
        for i, (uid, length) in enumerate(rows):
            self._cache[(uid, length)] = {
                k: (v[i, :length] if k in token_keys else v[i]).detach().cpu()
                for k, v in outputs.items()
            }

    def _from_cache(
        self, rows: list[tuple[int, int]], batch: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        device, width = batch["input_ids"].device, batch["input_ids"].size(-1)
        token_keys = getattr(self.loss, "reference_token_keys", ())
        out = {}
        for key in self._cache[rows[0]]:
            items = [self._cache[r][key] for r in rows]
            if key in token_keys:  # right padding, as in the batch
                items = [torch.nn.functional.pad(t, (0, 0, 0, width - t.size(0))) for t in items]
            out[key] = torch.stack(items).to(device)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}  # the reference model stays out of checkpoints

    def __repr__(self) -> str:
        return f"ReferenceForward(cache={self.cache_enabled})"
