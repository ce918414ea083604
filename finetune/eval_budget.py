"""What share of a training run's wall time the in-training evaluation takes, from its inputs.

``scripts/eval_share.py --estimate CONFIG`` measures what this machine can (the config's data
pipeline, the evaluated sessions' prompts and actions in tokens, sandbox seconds from rows of a
run on the evaluated suites), takes what it cannot from ``bench/eval_share_a100.json`` (GPU
figures, each with where it comes from), and prints ``estimate(inputs)``.

The model, every term an upper bound where a choice was needed:

- training between two evaluations: ``interval`` optimizer steps of ``6 * params * tokens``
  model FLOPs (forward and backward) over ``ranks * peak_flops * mfu`` (MFU counts model FLOPs:
  the forward that activation checkpointing runs again is inside it);
- one synchronous evaluation (``fsdp_generation: gathered``): the full weights gathered once,
  then every rank runs its ``ceil(sessions / ranks)`` episodes in waves of ``min(workers,
  gen_batch)``; each wave is a container, ``max_steps`` steps (no episode ends early at green)
  of one batched generation (the longest action: ``action_tokens`` decoded one token at a time,
  after a prefill of the prompt so far for every sequence of the batch) followed by its tool
  call, then the verification. Training waits for the slowest rank;
- asynchronous (``mode: async``): training waits for the snapshot only (the full weights to
  rank 0's CPU, ``gather_s``); writing it as an ``hf:`` folder and the evaluation run beside
  training (the evaluation on another device) and keep up when both end within the interval.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Inputs:
    ranks: int
    global_batch: int  # samples per optimizer step, all ranks
    interval_steps: float  # optimizer steps between two evaluations
    tokens_per_example: float  # mean, after truncation
    params: float
    peak_flops: float  # per device, the training precision's dense peak
    mfu: float  # model FLOPs utilisation of training
    eval_sessions: int
    max_steps: int
    workers: int  # sandboxes per rank
    gen_batch: int  # sequences a rank decodes together
    action_tokens: float  # decoded per step: the batch waits for its longest action
    prompt_tokens: float  # prefilled per sequence and step
    decode_s_per_token: float  # one batched decoding step
    prefill_tokens_per_s: float
    acquire_s: float  # a container, per episode
    tool_s: float  # a tool call, per step
    verify_s: float  # the final verification, per episode
    gather_s: float  # the full weights, once per evaluation
    write_s: float  # async: the snapshot written as an hf folder, off the training thread


@dataclass(frozen=True)
class Estimate:
    train_step_s: float
    train_interval_s: float
    episodes_per_rank: int
    waves: int
    step_s: float  # one generation and its tool call
    episode_s: float
    sync_eval_s: float
    sync_share: float
    async_wait_s: float
    async_share: float
    async_keeps_up: bool


def estimate(x: Inputs) -> Estimate:
    if x.ranks < 1 or x.workers < 1 or x.gen_batch < 1 or x.max_steps < 1:
        raise ValueError("ranks, workers, gen_batch and max_steps must be at least 1")
    flops = 6 * x.params * x.tokens_per_example * x.global_batch
    train_step = flops / (x.ranks * x.peak_flops * x.mfu)
    train = train_step * x.interval_steps
    per_rank = math.ceil(x.eval_sessions / x.ranks)
    together = min(x.workers, x.gen_batch)
    waves = math.ceil(per_rank / together)
    batch = min(together, per_rank)
    generate = (
        x.action_tokens * x.decode_s_per_token + batch * x.prompt_tokens / x.prefill_tokens_per_s
    )
    step = generate + x.tool_s
    episode = x.acquire_s + x.max_steps * step + x.verify_s
    sync = x.gather_s + waves * episode
    return Estimate(
        train_step_s=train_step,
        train_interval_s=train,
        episodes_per_rank=per_rank,
        waves=waves,
        step_s=step,
        episode_s=episode,
        sync_eval_s=sync,
        sync_share=sync / (train + sync),
        async_wait_s=x.gather_s,
        async_share=x.gather_s / (train + x.gather_s),
        async_keeps_up=x.write_s + waves * episode <= train,
    )


def table(x: Inputs, e: Estimate, where: dict[str, str]) -> str:
    """Markdown: every input with where it comes from, then the estimate."""
    lines = ["| input | value | where |", "|---|---|---|"]
    for name, value in asdict(x).items():
        lines.append(f"| {name} | {_fmt(value)} | {where.get(name, '')} |")
    lines += ["", "| estimate | value |", "|---|---|"]
    for name, value in asdict(e).items():
        shown = f"{value:.1%}" if name.endswith("share") else _fmt(value)
        lines.append(f"| {name} | {shown} |")
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
