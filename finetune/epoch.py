"""What one epoch of a config is, from its data pipeline alone (no model is built):

    python -m finetune.epoch CONFIG [--ranks 8] [--set KEY=VALUE ...]

The trainer's own steps run as in a training run — the sessions (split applied), the callbacks,
the held-out check over every source, the tokenizer, the tokenised examples — and a markdown
table says what they make on ``--ranks`` processes: examples and tokens, the samples Composer's
sampler repeats so every rank gets as many, optimizer steps per epoch and in the run, warm-up and
evaluation interval in steps. A config whose epoch is one optimizer step, whose warm-up is less
than a batch or whose evaluation never fires shows it here, before any GPU time is spent.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from finetune.errors import ConfigError, DataError


@dataclass(frozen=True)
class Epoch:
    sources: dict[str, int]  # sessions trained on, per data source (its config key)
    examples: int
    tokens: int  # after truncation to data.max_seq_len (both sides of a DPO pair)
    truncated: int  # examples cut to fit
    ranks: int
    batch_size: int  # per rank
    duplicates: int  # samples repeated so that every rank gets as many
    global_batch: int  # samples in the epoch's first optimizer step, all ranks
    steps_per_epoch: int
    total_steps: int
    warmup_steps: float
    eval_every_steps: float | None  # None: no harness_eval
    evaluations: int  # during the run, the one at fit end included


@dataclass(frozen=True)
class Pipeline:
    """What a training run's data steps make, no model built (scripts/eval_share.py reads it too)."""

    trainer: Any
    sessions: list[dict[str, Any]]
    callbacks: list[Any]
    sources: dict[str, set[str]]
    tokenizer: Any
    examples: list[Any]


def pipeline(cfg: Any) -> Pipeline:
    """The trainer's own data steps: sessions (split applied), callbacks, the held-out check over
    every source, the tokenizer, the tokenised examples."""
    from finetune.split import check_held_out, split_of
    from finetune.trainers import TRAINERS

    trainer = TRAINERS.resolve(cfg.get("trainer.type", str, "sft"))(cfg)
    trainer.save_folder = None  # a dry run writes no tokenizer into the run's folder
    sessions = trainer.sessions()
    callbacks = trainer.callbacks()
    sources = trainer.trained_ids(sessions)
    check_held_out(sources, callbacks, split_of(cfg))
    try:
        tokenizer = trainer.tokenizer(sessions)
    except OSError as exc:  # a hub name on a machine that cannot reach the hub
        raise ConfigError(
            "tokenizer.path",
            f"the model's tokenizer does not load ({str(exc).splitlines()[0]}); set "
            "tokenizer.path to a local copy (or model.tiny: a tiny tokenizer trained on the data)",
        ) from None
    examples = trainer.records(sessions, tokenizer)
    return Pipeline(trainer, sessions, callbacks, sources, tokenizer, examples)


def epoch_of(cfg: Any, ranks: int, made: Pipeline | None = None) -> Epoch:
    """One epoch on ``ranks`` processes (``made``: the pipeline when already run)."""
    if ranks < 1:
        raise ConfigError("--ranks", f"must be at least 1, got {ranks}")
    made = made or pipeline(cfg)
    trainer, callbacks, examples = made.trainer, made.callbacks, made.examples
    tokens = sum(len(_ids(e)) for e in examples)
    per_rank = math.ceil(len(examples) / ranks)  # DistributedSampler, drop_last=False
    batch = trainer.batch_size
    steps = math.ceil(per_rank / batch)
    total = _steps(cfg.get("train.max_duration", str, "1ep"), "train.max_duration", steps, None)
    warmup = _steps(cfg.get("scheduler.t_warmup", str, "0ba"), "scheduler.t_warmup", steps, total)
    evals = [cb for cb in callbacks if hasattr(cb, "interval")]
    every = (
        _steps(evals[0].interval, "callbacks.harness_eval.interval", steps, total)
        if evals
        else None
    )
    count = 0
    if every:
        count = int(total // every) + (0 if total % every == 0 else 1)  # + the one at fit end
    return Epoch(
        sources={k: len(v) for k, v in made.sources.items()},
        examples=len(examples),
        tokens=tokens,
        truncated=trainer.truncation.truncated_examples if trainer.truncation else 0,
        ranks=ranks,
        batch_size=batch,
        duplicates=per_rank * ranks - len(examples),
        global_batch=ranks * min(batch, per_rank),
        steps_per_epoch=steps,
        total_steps=int(total),
        warmup_steps=warmup,
        eval_every_steps=every,
        evaluations=count,
    )


def _ids(example: Any) -> tuple[int, ...]:
    """An example's tokens: its input, or both sides of a DPO pair."""
    if hasattr(example, "input_ids"):
        return example.input_ids
    return example.chosen_ids + example.rejected_ids


def _steps(value: str, key: str, per_epoch: int, total: float | None) -> float:
    """A Composer time string in optimizer steps (``dur``: a fraction of ``total``)."""
    from composer.core import Time, TimeUnit

    try:
        t = Time.from_timestring(str(value))
    except ValueError as exc:
        raise ConfigError(key, f"{value!r} is not a Composer time string ({exc})") from None
    if t.unit == TimeUnit.BATCH:
        return float(t.value)
    if t.unit == TimeUnit.EPOCH:
        return float(t.value * per_epoch)
    if t.unit == TimeUnit.DURATION and total is not None:
        return float(t.value * total)
    raise ConfigError(key, f"{value!r}: the dry run counts only ba, ep (and dur after the first)")


def table(epoch: Epoch) -> str:
    e = asdict(epoch)
    sources = e.pop("sources")
    rows = [("sessions " + k, v) for k, v in sources.items()] + list(e.items())
    lines = ["| what | value |", "|---|---|"]
    for name, value in rows:
        shown = f"{value:g}" if isinstance(value, float) else value
        lines.append(f"| {name.replace('_', ' ')} | {shown} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from finetune.config import add_config_arguments, load_config

    parser = argparse.ArgumentParser(prog="python -m finetune.epoch", description=__doc__)
    add_config_arguments(parser)
    parser.add_argument("--ranks", type=int, default=1, help="processes (GPUs) of the run")
    args = parser.parse_args(argv)
    try:
        print(table(epoch_of(load_config(args.config, args.overrides), args.ranks)))
    except (ConfigError, DataError) as exc:
        print(f"finetune.epoch: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
