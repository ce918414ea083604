"""Run by tests/finetune/test_fsdp.py under ``composer -n 2``: the tiny-cpu config through
Composer's own FSDP path on CPU (gloo), then a JSON report per rank of what FSDP made of it and,
with ``export.folder`` set, the trained LM's logits for a fixed input (``trained_logits.pt``,
rank 0) to compare the export with, each rank's gathered copy's (``gathered_logits<r>.pt``), and
a detached snapshot written after the weights changed (``hf-detached``, ``detached_export``).

One substitution, and why: Composer 0.32.1's ``prepare_fsdp_module`` passes
``device_id=torch.cuda.current_device()`` to FullyShardedDataParallel unconditionally, which
raises "Found no NVIDIA driver" on a CPU machine (test_composer_fsdp_asks_for_a_cuda_device
checks that). torch's FSDP itself runs on CPU with ``device_id=cpu``, so that one call answers
the CPU device; everything else — Composer's wrapping, activation checkpointing, our algorithms,
sharded checkpoints — is the real code.

usage: fsdp_cpu_run.py OUT_DIR CONFIG [--set KEY=VALUE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

torch.cuda.current_device = lambda: torch.device("cpu")  # see the module doc

from composer import Callback  # noqa: E402
from composer.utils import dist  # noqa: E402

from finetune.algorithms import global_grad_norm  # noqa: E402
from finetune.config import load_config  # noqa: E402
from finetune.trainers import build_trainer  # noqa: E402


class Probe(Callback):
    """After the algorithms at AFTER_TRAIN_BATCH (clipping included): the global norm as the
    optimizer will see it."""

    def __init__(self) -> None:
        self.clipped_norms: list[float] = []

    def after_train_batch(self, state, logger) -> None:
        self.clipped_norms.append(float(global_grad_norm(state.model)))


def report(trainer, probe: Probe) -> dict:
    from composer.loggers import InMemoryLogger
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
    from torch.distributed.fsdp import FullyShardedDataParallel

    from finetune.callbacks import HarnessEval

    memory = next(d for d in trainer.logger.destinations if isinstance(d, InMemoryLogger))
    model = trainer.state.model
    lm = model.lm
    params = {p.device.type for p in model.parameters()}
    evals = [cb for cb in trainer.state.callbacks if isinstance(cb, HarnessEval)]
    return {
        # with callbacks.harness_eval: the last evaluation's rounds and padded rounds, metrics
        "harness_rounds": list(evals[0].rounds) if evals else None,
        "harness": evals[0].last if evals else None,
        "lm_fsdp_units": sum(isinstance(m, FullyShardedDataParallel) for m in lm.modules()),
        "checkpointed": sorted(
            type(m._checkpoint_wrapped_module).__name__
            for m in lm.modules()
            if isinstance(m, CheckpointWrapper)
        ),
        "heads_fsdp": {
            name: isinstance(getattr(model, f"{name}_head"), FullyShardedDataParallel)
            for name in ("intent", "tool", "reward", "cursor")
        },
        "param_devices": sorted(params),
        "buffer_devices": sorted({b.device.type for b in model.buffers(recurse=False)}),
        "param_dtypes": sorted({str(p.dtype) for p in model.parameters()}),
        "grad_norms": [float(v) for _, v in memory.data["grad_norm/global"]],
        "clipped_norms": probe.clipped_norms,
        "losses": [float(v) for _, v in memory.data["loss/train/total"]],
    }


PROBE = torch.arange(1, 25).unsqueeze(0)  # 24 token ids every tiny vocabulary has


def trained_logits(trainer) -> torch.Tensor:
    """The trained LM's logits for PROBE (collective under FSDP: every rank calls)."""
    lm = trainer.state.model.lm.eval()  # no dropout: the comparison is exact
    with torch.no_grad():
        return lm(input_ids=PROBE, use_cache=False).logits.float()


def main() -> None:
    out, config, rest = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    overrides = [rest[i + 1] for i in range(0, len(rest), 2) if rest[i] == "--set"]
    trainer = build_trainer(load_config(config, overrides))
    probe = Probe()
    trainer.state.callbacks.append(probe)
    trainer.fit()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{dist.get_global_rank()}.json").write_text(json.dumps(report(trainer, probe)))
    export = [cb for cb in trainer.state.callbacks if type(cb).__name__ == "ExportHF"]
    if export:
        from finetune.export import full_lm

        logits = trained_logits(trainer)  # what the exported folder must reproduce
        if dist.get_global_rank() == 0:
            torch.save({"input_ids": PROBE, "logits": logits}, out / "trained_logits.pt")
        # and each rank's gathered copy (HarnessEval's fsdp_generation: gathered), no collective
        with torch.no_grad():
            copy = full_lm(trainer.state.model)(input_ids=PROBE, use_cache=False).logits
        torch.save(copy.float(), out / f"gathered_logits{dist.get_global_rank()}.pt")
        detached_export(trainer, out, export[0].max_result_chars)
    trainer.close()


def detached_export(trainer, out: Path, max_result_chars: int) -> None:
    """HarnessEval's asynchronous export (finetune/callbacks.py): a detached snapshot on every
    rank, then the weights change in place as an optimizer step would before rank 0 writes it to
    ``hf-detached``; and the changed model's logits (``changed_logits.pt``), which the folder
    must not have. Under FSDP the gathered state is a copy with or without ``detach``
    (finetune/export.py, ``_detached``): what ``detach`` adds here is the tokenizer's copy."""
    from finetune.export import agent_model, snapshot_hf

    snapshot = snapshot_hf(trainer.state, None, max_result_chars=max_result_chars, detach=True)
    assert (snapshot is None) == (dist.get_global_rank() != 0)
    assert snapshot is None or snapshot.tokenizer is not agent_model(trainer.state).tokenizer
    with torch.no_grad():
        for p in trainer.state.model.parameters():  # each rank's own shard
            p.add_(1.0)
    if snapshot is not None:
        snapshot.write(out / "hf-detached")
    changed = trained_logits(trainer)  # collective: after rank 0's write
    if dist.get_global_rank() == 0:
        torch.save(changed, out / "changed_logits.pt")


if __name__ == "__main__":
    main()
