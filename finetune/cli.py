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
    add_config_arguments(p)
    p.set_defaults(func=run)


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """CONFIG and --set KEY=VALUE: the same for `etai train` and `composer -m finetune.train`."""
    p.add_argument("config", help="training config (YAML), e.g. finetune/configs/tiny-cpu.yaml")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set data.sessions=my.jsonl (repeatable)",
    )


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
