"""One synchronous evaluation of the model being trained, on every rank (``evaluate``); the
Composer callback (finetune/callbacks.py) decides when, and broadcasts and logs what it returns.

The evaluation is sharded: rank r evaluates sessions r, r+W, ... (``harness.run`` with the agent
``hfmem:<run>-ba<N>``, eval mode under ``no_grad``, train mode restored after) in
``ba<N>/rank<r>/``. Without FSDP every rank holds the whole model. Under FSDP
(``fsdp_generation``), ``gathered`` (the default): the full weights are all-gathered once per
evaluation into a plain copy on every rank (``export.full_lm``), which then generates on its own
like a replica; ``lockstep`` (when a full copy does not fit beside the shards): a forward is a
collective, so every rank generates in rounds with all the others (finetune/lockstep.py), every
block's weights gathered for every token, and a rank with nothing to generate, or whose shard is
done, pads the round with a dummy generation until every rank is done. The rows are gathered
(``all_gather_object``, which every rank reaches whatever happened to its shard) and rank 0
writes them and one summary to ``ba<N>/`` (``results.jsonl``, ``summary.json``). One process: no
rank folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from composer.core.precision import get_precision_context
from composer.utils import dist
from torch.distributed.fsdp import FullyShardedDataParallel

import harness
from finetune.evaluation import eval_metrics, suite_parts, write_merged
from finetune.export import agent_model, full_lm, is_fsdp
from finetune.lockstep import Lockstep
from harness.agents.hf import live_model
from harness.runs.results import read_rows


def evaluate(cb: Any, state: Any, batch: int, start: float, out: Path) -> dict[str, float] | None:
    """Evaluate with the settings of HarnessEval ``cb`` into ``out``; every rank must call it.
    Rank 0 returns the metrics, the other ranks None; under FSDP ``cb.rounds`` becomes the
    generation rounds of this rank, and the padded ones."""
    model = agent_model(state)
    fsdp = is_fsdp(model)
    rank, world = dist.get_global_rank(), dist.get_world_size()
    ids = cb.evaluated_ids()
    if world == 1:
        rows, skipped = _shard(cb, state, model, fsdp, batch, start, ids, out)
        if len(cb.suites) > 1:  # one folder per suite: the rows and a summary over all
            write_merged(out, rows, k=cb.k)
        return eval_metrics(rows, k=cb.k, n=len(ids), skipped_before=skipped)
    # Every rank evaluates its share (rank r: sessions r, r+W, ...) in its own folder: with a
    # full replica (DDP or a gathered FSDP copy), or taking part in every forward (FSDP,
    # lockstep). Every rank reaches the gather whatever happened to its shard; rank 0 merges.
    try:
        mine = _shard(cb, state, model, fsdp, batch, start, ids[rank::world], out / f"rank{rank}")
        part: tuple = (*mine, None)
    except Exception as e:  # noqa: BLE001 - reported by rank 0 as harness/error
        part = ([], 0, f"rank {rank}: {type(e).__name__}: {e}")
    parts = dist.all_gather_object(part)
    if rank != 0:
        return None
    failed = [error for _, _, error in parts if error]
    if failed:
        raise RuntimeError("; ".join(failed))
    rows = [row for shard, _, _ in parts for row in shard]
    write_merged(out, rows, k=cb.k)
    return eval_metrics(rows, k=cb.k, n=len(ids), skipped_before=sum(n for _, n, _ in parts))


def _shard(
    cb: Any,
    state: Any,
    model: Any,
    fsdp: bool,
    batch: int,
    start: float,
    ids: Sequence[str],
    out: Path,
) -> tuple[list[dict[str, Any]], int]:
    """This process's rows for ``ids`` in ``out``, and how many sessions the budget skipped
    before anything started. Under FSDP a rank with nothing (left) to evaluate still serves
    every generation round until all ranks are done."""
    lm = model.lm
    if fsdp and hasattr(lm, "merge_and_unload"):
        raise NotImplementedError("evaluating a LoRA model under FSDP is not supported")
    if fsdp and cb.fsdp_generation == "gathered":
        lm, fsdp = full_lm(model), False  # collective: before any rank returns below
        cb.rounds = (0, 0)
    spent = time.monotonic() > start + cb.budget_s  # spent gathering: nothing starts
    if not fsdp and (spent or not ids):
        return [], len(ids) if spent else 0
    name = f"{state.run_name}-ba{batch}"
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), get_precision_context(state.precision), _full_root(lm, fsdp):
            fingerprint = _weights_fingerprint(lm, name, summed_over_ranks=fsdp)

            def run(lockstep: Any = None) -> str | None:
                if spent or not ids:
                    return None
                tok = model.tokenizer
                return _run(cb, lm, tok, name, fingerprint, start, ids, out, lockstep)

            if fsdp:
                lockstep = _lockstep(lm, model.tokenizer)
                spec = lockstep.drive(lambda: run(lockstep))
                cb.rounds = (lockstep.rounds, lockstep.padded)
            else:
                spec = run()
    finally:
        model.train(was_training)
    if spec is None:
        return [], len(ids) if spent else 0
    rows = [
        r
        for folder, _, _ in suite_parts(cb.suites, ids, out)
        for r in read_rows(folder / "results.jsonl")
    ]
    return [r for r in rows if r["agent"] == spec and r["session_id"] in set(ids)], 0


def _run(
    cb: Any,
    lm: Any,
    tokenizer: Any,
    name: str,
    fingerprint: str,
    start: float,
    ids: Sequence[str],
    out: Path,
    lockstep: Any = None,
) -> str:
    with live_model(
        name,
        lm,
        tokenizer,
        fingerprint=fingerprint,
        max_result_chars=cb.max_result_chars,
        deadline=start + cb.budget_s,
        lockstep=lockstep,
    ) as spec:
        for folder, suite, mine in suite_parts(cb.suites, ids, out):
            harness.run(
                suite,
                [spec],
                k=cb.k,
                max_steps=cb.max_steps,
                workers=cb.workers,
                out=folder,
                sandbox=cb.sandbox,
                options=dict(cb.generation),
                progress=False,
                session_ids=mine,
            )
    return spec


def _weights_fingerprint(lm: Any, name: str, *, summed_over_ranks: bool = False) -> str:
    """Cheap and weight-dependent: a resumed run that reaches the same batch with the same weights
    reuses its rows, with other weights it does not. One sum per tensor, no copy to the host.
    ``summed_over_ranks`` (FSDP, collective): each rank holds shards, so one total over all ranks
    makes the same fingerprint everywhere."""
    with torch.no_grad():
        sums = torch.stack([p.detach().float().sum() for p in lm.parameters()])
        if summed_over_ranks:
            sums = sums.sum().reshape(1)
            dist.all_reduce(sums)
        sums = sums.cpu()
    return hashlib.sha256(name.encode() + sums.numpy().tobytes()).hexdigest()[:16]


def _full_root(lm: Any, fsdp: bool) -> Any:
    """Under FSDP, the LM's root unit gathered (embeddings, final norm, head) for the evaluation,
    collectively; the blocks gather their own weights in their forward. Else nothing to do."""
    if not fsdp:
        return contextlib.nullcontext()
    return FullyShardedDataParallel.summon_full_params(lm, recurse=False, writeback=False)


def _lockstep(lm: Any, tokenizer: Any) -> Lockstep:
    """The rounds every rank generates in (finetune/lockstep.py); the padding is a one-token
    generation on one token, which steps (synced_gpus) as long as the longest batch of the round."""
    device = next(lm.parameters()).device
    pad = next(i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0) if i is not None)

    def dummy() -> None:
        ids = torch.tensor([[pad]], device=device)
        lm.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=1,
            pad_token_id=pad,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            synced_gpus=True,
        )

    return Lockstep(device, dummy)
