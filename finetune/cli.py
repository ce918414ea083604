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


def run(args: argparse.Namespace) -> int:
    try:
        from finetune.train import main
    except ImportError as e:
        from harness.errors import InputError

        raise InputError(
            f"`etai train` needs the train extra (pip install 'etai[train]'): {e}"
        ) from None
    argv = [args.config]
    for o in args.overrides:
        argv += ["--set", o]
    return main(argv)
