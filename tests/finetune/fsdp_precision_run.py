"""Run by tests/finetune/test_fsdp_precision.py under ``composer -n 2``: a tiny Llama (RoPE) in an
AgentModel wrapped by Composer's FSDP with mixed precision at ``amp_bf16``, once with Composer's
``DEFAULT`` preset as it stands and once with what ``finetune.fsdp`` makes of it; each time the
logits of the last 32 of 4,160 tokens against the fp32 model's. Writes a JSON report per rank.

Two substitutions, and why. Composer refuses any precision but fp32 on a CPU device
(``_validate_precision``, called by the Trainer and by ``prepare_fsdp_module``), while torch's
FSDP casts to bf16 on CPU as it does on a GPU: the check is answered here, and the model is
wrapped by ``prepare_fsdp_module``, the call the Trainer makes, with the FSDPConfig and precision
a run would hand it. The CUDA shim is fsdp_cpu_run.py's (see its module doc).

usage: fsdp_precision_run.py OUT_DIR
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch

torch.cuda.current_device = lambda: torch.device("cpu")  # see fsdp_cpu_run.py

import composer.distributed.dist_strategy as dist_strategy  # noqa: E402
from composer.utils import dist  # noqa: E402
from composer.utils.parallelism import FSDPConfig  # noqa: E402

from finetune.fsdp import fsdp_settings  # noqa: E402
from finetune.lm import build_tiny  # noqa: E402
from finetune.model import AgentModel  # noqa: E402

dist_strategy._validate_precision = lambda precision, device: None  # see the module doc

SEQ, TAIL, VOCAB = 4160, 32, 128  # the compared positions are 4128..4159
FSDP = {"sharding_strategy": "FULL_SHARD", "mixed_precision": "DEFAULT"}


def tiny_rope_model() -> AgentModel:
    torch.manual_seed(0)
    lm = build_tiny({"arch": "llama", "layers": 2, "heads": 2, "hidden": 64}, VOCAB, 8192)
    # At the default init (std 0.02) attention is nearly uniform, so any RoPE angle gives the
    # same logits; sharper queries and keys make the logits depend on relative position.
    with torch.no_grad():
        for name, p in lm.named_parameters():
            if "q_proj" in name or "k_proj" in name:
                p.mul_(10)
    return AgentModel(lm, tokenizer=None, loss_fn=None)


def tail_logits(lm: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    pos = torch.arange(SEQ).unsqueeze(0)
    return lm(input_ids=ids, position_ids=pos, use_cache=False).logits[:, -TAIL:].float()


def under_fsdp(model: AgentModel, fsdp: dict, ids: torch.Tensor) -> dict:
    """The tail logits through the FSDP-wrapped LM, and the dtypes its forward saw."""
    model = copy.deepcopy(model)
    dist_strategy.prepare_fsdp_module(
        model, None, FSDPConfig(**fsdp), precision="amp_bf16", device="cpu"
    )
    lm = model.lm
    seen: dict[str, str] = {}
    rotary = next(m for m in lm.modules() if type(m).__name__ == "LlamaRotaryEmbedding")
    q_proj = next(m for n, m in lm.named_modules() if n.endswith("q_proj"))

    def note(key: str, tensor_of):  # a pre-hook returning None leaves the arguments alone
        return lambda module, args: seen.update({key: str(tensor_of(module).dtype)}) and None

    hooks = [
        rotary.register_forward_pre_hook(note("inv_freq", lambda m: m.inv_freq)),
        q_proj.register_forward_pre_hook(note("q_proj", lambda m: m.weight)),
    ]
    with torch.no_grad():  # no autocast: on CPU Composer's amp_bf16 context is a no-op
        logits = tail_logits(lm, ids)
    for h in hooks:
        h.remove()
    return {"logits": logits, "dtypes": seen}


def main() -> None:
    out = Path(sys.argv[1])
    dist.initialize_dist("cpu")
    model = tiny_rope_model()
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = tail_logits(model.lm.eval(), ids)
    report = {}
    for name, fsdp in (("composer", FSDP), ("finetune", fsdp_settings(FSDP, "amp_bf16"))):
        got = under_fsdp(model, fsdp, ids)
        error = (got["logits"] - reference).abs().max() / reference.std()
        report[name] = {"error": float(error), "dtypes": got["dtypes"]}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{dist.get_global_rank()}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
