"""`etai train CONFIG.yaml`: the fine-tuning entry point, wired into the etai command line.

Cheap to import (torch and Composer load only when the command runs), so `etai --help` stays fast
and harness-only installs without the `train` extra still get every other command.
"""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="fine-tune a model with Composer from a YAML config (needs the train extra)",
        description="Build a Composer Trainer from CONFIG.yaml and fit it. Multi-GPU: "
        "`composer -n 8 -m finetune.train CONFIG.yaml` (see finetune/README.md).",
    )
    from finetune.config import add_config_arguments

    add_config_arguments(p)
    p.set_defaults(func=run)
    i = sub.add_parser(
        "improve",
        help="learn from execution: SFT, then collect rollouts -> RFT -> evaluate, per iteration",
        description="Iteration 0 fine-tunes on the training split's reference traces; each later "
        "iteration samples rollouts of the previous model in sandboxes, keeps the verified-green "
        "ones and fine-tunes on them. Every iteration's model is exported and scored on the "
        "training and held-out splits (OUT/iterations.jsonl). Rerunning resumes.",
    )
    add_config_arguments(i)
    i.set_defaults(func=run_improve)


def _needs_train_extra(command: str) -> None:
    try:
        import composer  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        from harness.base.errors import InputError

        raise InputError(
            f"`etai {command}` needs the train extra (pip install 'etai[train]'): {e}"
        ) from None


def run(args: argparse.Namespace) -> int:
    _needs_train_extra("train")
    from finetune.train import main

    argv = [args.config]
    for o in args.overrides:
        argv += ["--set", o]
    return main(argv)


def run_improve(args: argparse.Namespace) -> int:
    import sys

    _needs_train_extra("improve")
    from finetune.errors import ConfigError, DataError
    from finetune.improve import improve, load_improve_config

    try:
        improve(
            load_improve_config(args.config, args.overrides),
            log=lambda m: print(f"etai improve: {m}", file=sys.stderr, flush=True),
        )
    except (ConfigError, DataError) as exc:
        kind = "config" if isinstance(exc, ConfigError) else "data"
        print(f"etai improve: {kind} error: {exc}", file=sys.stderr)
        return 2
    return 0
