"""What ``train.fsdp`` becomes before it reaches Composer: mixed precision that keeps buffers fp32.

Composer's presets cast *buffers* to the compute dtype too (``DEFAULT`` and ``PURE`` set
``buffer_dtype`` = the trainer's precision; an FSDP block with no ``mixed_precision`` key gets
``DEFAULT``). A buffer such as RoPE's ``inv_freq`` rounded to bf16 is off by up to 2^-9 of
itself, and the angle error grows with the distance between query and key: radians at 4k tokens,
while the exported model recomputes ``inv_freq`` in fp32, so training and inference disagree
(tests/finetune/test_fsdp_precision.py measures it). Parameters and the gradient reduction keep
the preset's dtypes; only ``buffer_dtype`` is pinned to fp32, and a config that asks otherwise
is refused.
"""

from __future__ import annotations

from typing import Any

from finetune.errors import ConfigError

KEY = "train.fsdp.mixed_precision"
PRESETS = ("DEFAULT", "PURE", "FULL")  # Composer 0.32.1's (mosaic_parallelism.get_mixed_precision)
_DTYPE_KEYS = ("param_dtype", "reduce_dtype", "buffer_dtype")
_FP32 = ("fp32", "float32", "torch.float32")


def fsdp_settings(fsdp: dict[str, Any], precision: str) -> dict[str, Any]:
    """``fsdp`` (the config's ``train.fsdp``) with ``mixed_precision`` as an explicit dict whose
    ``buffer_dtype`` is fp32; the other keys pass through unchanged."""
    from composer.distributed.mosaic_parallelism import get_mixed_precision

    mixed = fsdp.get("mixed_precision", "DEFAULT")
    if isinstance(mixed, str):
        if mixed.upper() not in PRESETS:
            raise ConfigError(KEY, f"unknown preset {mixed!r}; known: {', '.join(PRESETS)}")
        try:
            _, param, reduce, _ = get_mixed_precision(precision, mixed.upper())
        except ValueError as exc:  # a precision Composer has no dtype for
            raise ConfigError("train.precision", str(exc)) from None
        settings = {"param_dtype": _name(param), "reduce_dtype": _name(reduce)}
    elif isinstance(mixed, dict):
        unknown = sorted(set(mixed) - set(_DTYPE_KEYS))
        if unknown:
            raise ConfigError(KEY, f"unknown key(s) {', '.join(unknown)}; known: {_DTYPE_KEYS}")
        buffer = mixed.get("buffer_dtype")
        if buffer is not None and str(buffer) not in _FP32:
            raise ConfigError(
                f"{KEY}.buffer_dtype",
                f"{buffer!r} would round buffers such as RoPE's inv_freq; only fp32 is allowed "
                "(leave it out)",
            )
        settings = {k: mixed[k] for k in ("param_dtype", "reduce_dtype") if mixed.get(k)}
    else:
        raise ConfigError(KEY, f"expected one of {', '.join(PRESETS)} or a mapping, got {mixed!r}")
    return {**fsdp, "mixed_precision": {**settings, "buffer_dtype": "fp32"}}


def _name(dtype: Any) -> str | None:
    """A torch dtype as Composer's ``_get_torch_dtype`` reads it back (None: not cast)."""
    return None if dtype is None else str(dtype)
