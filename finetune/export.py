"""A trained agent model as a transformers folder that ``etai run --agent hf:FOLDER`` loads.

The folder holds what ``save_pretrained`` writes for the causal LM alone (LoRA merged in), so any
transformers or vLLM user can load it without ETAI code; the ETAI tokenizer with
``ETAI_CHAT_TEMPLATE`` (a server renders exactly the trained text), its markers saved as added
tokens that are not special (a server's ``skip_special_tokens`` decoding keeps them) and the
generation config ending a turn at ``<RESULT>`` / ``<TRACE_END>``; ``etai.json`` with the
settings the prompts must be rendered with (``max_result_chars``); and the four heads plus the
tool-failure bias in ``etai_heads.safetensors`` beside the weights (keys as in ``AgentModel``,
e.g. ``intent_head.0.weight``, ``tool_bias``). The hf agent ignores that file; it is there so a
constrained decoder or a later fine-tune can pick the heads up.

Every rank must call ``export_hf`` (under FSDP the full weights are gathered collectively, see
``gathered_state``); only global rank 0 writes, from a CPU copy of the LM built on the meta
device and loaded strictly (``lm_from_state``). The folder is replaced whole or not at all.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finetune.errors import ExportError

HEADS_FILE = "etai_heads.safetensors"


def agent_model(model_or_state: Any) -> Any:
    """The AgentModel inside a Composer State, a DDP wrapper, or itself."""
    model = getattr(model_or_state, "model", model_or_state)  # a State holds it as .model
    return (
        getattr(model, "module", model)
        if type(model).__name__ == "DistributedDataParallel"
        else model
    )


def is_fsdp(model: Any) -> bool:
    from torch.distributed.fsdp import FullyShardedDataParallel

    return any(isinstance(m, FullyShardedDataParallel) for m in model.modules())


def gathered_state(model: Any) -> dict[str, Any] | None:
    """The AgentModel's full state dict on global rank 0, None on the others.

    Collective under FSDP (every rank must call it; the result is on CPU); without FSDP it is the
    live ``state_dict()`` of rank 0, tensors shared with the model, nothing copied.
    """
    from composer.utils import dist

    if is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        # cpu_offload gathers one unit at a time into rank 0's CPU memory only (the other ranks
        # get nothing), never a full copy on a GPU. With the shards already on the CPU it must be
        # off: FSDP's "offload" is then no copy, and it frees the unsharded storage under the
        # views it is about to clone (a segfault in _full_post_state_dict_hook, torch 2.7), so
        # there every rank gathers the full tensors and only rank 0 keeps them.
        offload = any(p.device.type != "cpu" for p in model.parameters())
        options = StateDictOptions(full_state_dict=True, cpu_offload=offload)
        state = get_model_state_dict(model, options=options)
        return state if dist.get_global_rank() == 0 else None
    return model.state_dict() if dist.get_global_rank() == 0 else None


def plain_lm(
    model: Any, state: dict[str, Any] | None, *, merge_lora: bool, detach: bool = False
) -> Any:
    """A transformers model to save: the live LM when it is not sharded (a peft model merged into
    a copy when ``merge_lora``), else a CPU copy rebuilt on rank 0 from ``state``.

    ``detach``: always a CPU copy that shares no memory with the model, built from ``state``,
    which must then be detached already (``_detached``), or for a peft model a deep copy of the LM.
    """
    lm = model.lm
    peft = hasattr(lm, "merge_and_unload")
    if is_fsdp(model):
        if peft:
            raise NotImplementedError(
                "exporting or evaluating a LoRA model under FSDP is not supported"
            )
    elif peft and (merge_lora or detach):
        import copy

        lm = copy.deepcopy(lm).to("cpu") if detach else copy.deepcopy(lm)
        return lm.merge_and_unload() if merge_lora else lm
    elif not detach:
        return lm
    weights = {k[len("lm.") :]: v for k, v in (state or {}).items() if k.startswith("lm.")}
    return lm_from_state(lm, weights)


def full_lm(model: Any) -> Any:
    """On every rank, a plain copy of the FSDP-sharded LM on that rank's device (collective: every
    rank calls). The full weights are all-gathered once, so each rank can then generate on its own
    instead of gathering every block's weights for every token (finetune/lockstep.py). Costs one
    full copy of the LM per rank (in the shards' dtype) while it lives."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    # No cpu_offload: the tensors stay on the device, and every rank gets them (see gathered_state)
    options = StateDictOptions(full_state_dict=True, cpu_offload=False)
    state = get_model_state_dict(model, options=options)
    weights = {k[len("lm.") :]: v for k, v in state.items() if k.startswith("lm.")}
    return lm_from_state(model.lm, weights, device=next(model.lm.parameters()).device)


def lm_from_state(lm: Any, weights: dict[str, Any], device: Any = "cpu") -> Any:
    """A copy of ``lm`` (its config and class) holding ``weights``, loaded strictly; the tensors
    stay where ``weights`` has them, the non-persistent buffers go to ``device``.

    Built on the meta device, so no parameter is allocated or randomly initialised before the
    weights arrive (a 3B model would be initialised for nothing). Non-persistent buffers (RoPE's
    ``inv_freq``) are in no state dict: they are taken from ``lm``, whose buffers FSDP does not
    shard. Raises ExportError naming the keys when ``weights`` does not fit the model.
    """
    import torch
    from torch.distributed.fsdp._common_utils import clean_tensor_name
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        copy_ = AutoModelForCausalLM.from_config(lm.config)
    expected = set(copy_.state_dict())
    missing, unexpected = sorted(expected - set(weights)), sorted(set(weights) - expected)
    if missing or unexpected:
        raise ExportError(
            f"the gathered weights do not fit {type(copy_).__name__}: missing {missing[:5]} "
            f"({len(missing)} in all), unexpected {unexpected[:5]} ({len(unexpected)} in all)"
        )
    copy_.load_state_dict(weights, strict=True, assign=True)
    copy_.tie_weights()  # assign=True gave the tied keys (lm_head = embeddings) two tensors
    live = {clean_tensor_name(n): b for n, b in lm.named_buffers()}
    for name, buffer in list(copy_.named_buffers()):
        if buffer.is_meta:
            if name not in live:
                raise ExportError(f"buffer {name} is in no state dict and not in the live model")
            module, _, attr = name.rpartition(".")
            copy_.get_submodule(module).register_buffer(
                attr, live[name].detach().to(device).clone(), persistent=False
            )
    left = [n for n, t in [*copy_.named_parameters(), *copy_.named_buffers()] if t.is_meta]
    if left:
        raise ExportError(f"no value for {left[:5]} ({len(left)}) after loading")
    return copy_.eval()


def head_tensors(state: dict[str, Any]) -> dict[str, Any]:
    """Everything of the AgentModel that is not the LM: heads and the persistent tool bias."""
    return {
        k: v.detach().to("cpu").contiguous() for k, v in state.items() if not k.startswith("lm.")
    }


@dataclass
class Snapshot:
    """What an export writes, taken on rank 0 (``snapshot_hf``); ``write`` is file I/O only."""

    lm: Any
    tokenizer: Any
    heads: dict[str, Any] | None
    max_result_chars: int

    def write(self, folder: str | Path) -> Path:
        """Write ``folder`` (see the module doc), replacing it whole; returns it."""
        from finetune.tokenizer import make_servable
        from harness.agents import ETAI_CHAT_TEMPLATE
        from harness.agents.etai_format import STOP_MARKERS

        lm, tokenizer = self.lm, self.tokenizer
        folder = Path(folder)
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        # Generation must stop on the trained tokenizer's ids, not a base config's (a
        # config-built GPT-2 says eos 50256, outside a 512-token vocabulary).
        for cfg in (lm.config, lm.generation_config):
            cfg.pad_token_id, cfg.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
        # A server generating with the folder's own settings ends the turn where the agent's
        # turn ends: after <RESULT> (the environment speaks next) or <TRACE_END>. transformers
        # serve 4.57 cannot stop on strings (its `stop` needs a tokenizer generate is not
        # given), and it reuses its KV cache for the next step only when the cache holds exactly
        # the text sent back.
        ends = _marker_ids(tokenizer, STOP_MARKERS)
        if ends:
            lm.generation_config.eos_token_id = [tokenizer.eos_token_id, *ends]
        try:
            lm.save_pretrained(str(partial), safe_serialization=True)
        finally:  # a live model (HarnessEval generates with it) keeps a plain eos
            lm.generation_config.eos_token_id = tokenizer.eos_token_id
        previous = tokenizer.chat_template
        tokenizer.chat_template = ETAI_CHAT_TEMPLATE
        try:
            tokenizer.save_pretrained(str(partial))
        finally:
            tokenizer.chat_template = previous  # the caller's tokenizer is left as it was
        make_servable(partial)  # served: markers kept by skip_special_tokens, no token_type_ids
        settings: dict[str, Any] = {"max_result_chars": int(self.max_result_chars)}
        if self.heads is not None:
            from safetensors.torch import save_file

            save_file(self.heads, str(partial / HEADS_FILE))
            settings["heads"] = HEADS_FILE
        (partial / "etai.json").write_text(json.dumps(settings, indent=2) + "\n")
        _replace(partial, folder)
        return folder


def snapshot_hf(
    model_or_state: Any,
    tokenizer: Any,
    *,
    max_result_chars: int,
    heads: bool = True,
    detach: bool = False,
) -> Snapshot | None:
    """What ``export_hf`` writes, on rank 0; None on the other ranks (every rank must call it).

    ``detach``: the snapshot shares no memory with the model or the tokenizer being trained, so
    it can be written in another thread while training goes on and changes the weights (the
    asynchronous evaluation). Without it the live LM and tokenizer are used where they can be.
    ``tokenizer`` None takes the model's own (``AgentModel.tokenizer``).
    """
    import copy

    model = agent_model(model_or_state)
    state = gathered_state(model)
    if state is None:
        return None
    tokenizer = tokenizer if tokenizer is not None else model.tokenizer
    if detach:
        state, tokenizer = _detached(model, state), copy.deepcopy(tokenizer)
    lm = plain_lm(model, state, merge_lora=True, detach=detach)
    return Snapshot(lm, tokenizer, head_tensors(state) if heads else None, max_result_chars)


def export_hf(
    model_or_state: Any,
    tokenizer: Any,
    folder: str | Path,
    *,
    max_result_chars: int,
    heads: bool = True,
) -> Path | None:
    """Write ``folder`` (see the module doc); returns it on rank 0, None on the other ranks.

    ``tokenizer`` None takes the model's own (``AgentModel.tokenizer``).
    """
    snapshot = snapshot_hf(
        model_or_state, tokenizer, max_result_chars=max_result_chars, heads=heads
    )
    return None if snapshot is None else snapshot.write(folder)


def _detached(model: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` on the CPU with every tensor that shares storage with the model copied (a
    gathered FSDP state is already a copy; a plain ``state_dict()`` is the live tensors)."""
    live = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    out = {}
    for k, v in state.items():
        v = v.detach()
        shared = v.untyped_storage().data_ptr() in live
        out[k] = v.to("cpu", copy=True) if shared else v.to("cpu")
    return out


def _marker_ids(tokenizer: Any, markers: tuple[str, ...]) -> list[int]:
    """The ids of ``markers`` when each is one token of ``tokenizer``, else []."""
    ids = [tokenizer.convert_tokens_to_ids(m) for m in markers]
    unk = getattr(tokenizer, "unk_token_id", None)
    return ids if all(isinstance(i, int) and i != unk for i in ids) else []


def _replace(new: Path, folder: Path) -> None:
    """``new`` becomes ``folder``; a reader never sees a mix of two exports."""
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    new.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
