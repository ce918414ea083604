"""The language model under the heads: tiny from a config, or pretrained; LoRA and 4-bit optional."""

from __future__ import annotations

from typing import Any

from finetune.config import Config
from finetune.errors import ConfigError

TINY_ARCHS = ("gpt2", "llama")


def build_tiny(spec: dict[str, Any], vocab_size: int, max_seq_len: int) -> Any:
    """A randomly initialised GPT-2 or Llama built from a config (nothing is downloaded)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    spec = dict(spec)
    arch = spec.pop("arch", "gpt2")
    layers, heads, hidden = spec.pop("layers", 2), spec.pop("heads", 2), spec.pop("hidden", 64)
    if arch == "gpt2":
        config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=max_seq_len,
            n_embd=hidden,
            n_layer=layers,
            n_head=heads,
            **spec,
        )
        return GPT2LMHeadModel(config)
    if arch == "llama":
        config = LlamaConfig(
            vocab_size=vocab_size,
            max_position_embeddings=max_seq_len,
            hidden_size=hidden,
            intermediate_size=spec.pop("intermediate", hidden * 4),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=heads,
            **spec,
        )
        return LlamaForCausalLM(config)
    raise ConfigError(
        "model.tiny.arch", f"unknown tiny architecture {arch!r}; known: {', '.join(TINY_ARCHS)}"
    )


def build_lm(cfg: Config, tokenizer: Any, max_seq_len: int) -> Any:
    """The LM with embeddings resized to the tokenizer (ETAI tokens included); LoRA comes after
    (``apply_lora``) so a reference copy can be taken of the plain model."""
    if cfg.get("model.load_in_4bit", bool, False):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                "model.load_in_4bit", "4-bit loading needs a CUDA device (bitsandbytes); none found"
            )
    tiny = cfg.get("model.tiny", dict, None)
    pretrained = cfg.get("model.pretrained", str, None)
    if (tiny is None) == (pretrained is None):
        raise ConfigError("model", "set exactly one of model.tiny and model.pretrained")
    if tiny is not None:
        try:
            lm = build_tiny(tiny, len(tokenizer), max_seq_len)
        except TypeError as exc:
            raise ConfigError("model.tiny", str(exc)) from None
    else:
        lm = _load_pretrained(cfg, pretrained)
    dtype = cfg.get("model.dtype", str, None)
    if tiny is not None and dtype:
        lm = lm.to(_dtype(dtype))  # as from_pretrained(torch_dtype=...) does for a pretrained LM
    lm.resize_token_embeddings(len(tokenizer))
    lm.config.pad_token_id = tokenizer.pad_token_id
    return lm


def _load_pretrained(cfg: Config, name: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {}
    if cfg.get("model.load_in_4bit", bool, False):  # CUDA checked in build_lm
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
    dtype = cfg.get("model.dtype", str, None)
    if dtype:
        kwargs["torch_dtype"] = _dtype(dtype)
    return AutoModelForCausalLM.from_pretrained(name, **kwargs)


def _dtype(name: str) -> Any:
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ConfigError("model.dtype", f"{name!r} is not a torch dtype (e.g. bfloat16)")
    return value


def apply_lora(lm: Any, spec: dict[str, Any] | None) -> Any:
    """LoRA adapters through peft when ``model.lora`` is set; the LM unchanged otherwise.

    The trainable set is final here, so this is where low-precision trainable weights are refused
    (``model.check_master_weights``): a bf16 base under LoRA is fine, a bf16 full fine-tune is not.
    """
    from finetune.model import check_master_weights

    if spec:
        from peft import LoraConfig, get_peft_model

        try:
            config = LoraConfig(task_type="CAUSAL_LM", **spec)
        except TypeError as exc:
            raise ConfigError("model.lora", str(exc)) from None
        lm = get_peft_model(lm, config)
    try:
        check_master_weights(lm)
    except ValueError as exc:
        raise ConfigError("model.dtype", str(exc)) from None
    return lm
