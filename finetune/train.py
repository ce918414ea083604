"""``etai train CONFIG.yaml``: YAML -> Composer Trainer -> fit.

Single process: ``python -m finetune.train CONFIG``. Several: ``composer -n 8 -m finetune.train
CONFIG`` (Composer's launcher sets the rank variables; see finetune/README.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from finetune.errors import ConfigError, DataError

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def train(config_path: str | Path, overrides: Sequence[str] = ()) -> Any:
    """Build the trainer the config names, fit it, and return it (its loggers hold the metrics)."""
    from finetune.config import load_config
    from finetune.trainers import build_trainer

    trainer = build_trainer(load_config(config_path, overrides))
    try:
        trainer.fit()
    finally:
        trainer.close()  # flush and close loggers now, not in a destructor at interpreter exit
    return trainer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="etai train", description="Fine-tune an ETAI agent model."
    )
    from finetune.config import add_config_arguments

    add_config_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        train(args.config, args.overrides)
    except ConfigError as exc:
        print(f"etai train: config error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except DataError as exc:
        print(f"etai train: data error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
