"""Held-out evaluation: which sessions train and which the in-training harness evaluates.

``data.split`` names a YAML file ``{train: [ids], eval: [ids]}`` (the bundled suite's is
``finetune/splits/jest-bugfix.yaml``). Training keeps the ``train`` ids of ``data.sessions``; the
``harness_eval`` callback evaluates the ``eval`` ids unless it names its own ``sessions``. Whatever
the source, a session that is trained on and evaluated measures memorisation, so the build
refuses the overlap unless ``callbacks.harness_eval.allow_overlap: true`` says it is meant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from finetune.errors import ConfigError

KEY = "data.split"


@dataclass(frozen=True)
class Split:
    train: tuple[str, ...]
    eval: tuple[str, ...]


def load_split(path: Path) -> Split:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(KEY, f"cannot read {path}: {exc}") from None
    if not isinstance(raw, dict) or set(raw) != {"train", "eval"}:
        raise ConfigError(KEY, f"{path}: expected exactly the keys train and eval")
    lists = {}
    for part in ("train", "eval"):
        ids = raw[part]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ConfigError(KEY, f"{path}: {part} must be a non-empty list of session ids")
        if len(set(ids)) != len(ids):
            raise ConfigError(KEY, f"{path}: {part} names a session twice")
        lists[part] = tuple(ids)
    both = sorted(set(lists["train"]) & set(lists["eval"]))
    if both:
        raise ConfigError(KEY, f"{path}: in both train and eval: {', '.join(both)}")
    return Split(**lists)


def split_of(cfg: Any) -> Split | None:
    return load_split(cfg.path_of(KEY)) if cfg.get(KEY, str, None) else None


def train_sessions(sessions: list[dict[str, Any]], cfg: Any) -> list[dict[str, Any]]:
    """The sessions of ``data.sessions`` that ``data.split`` trains on (all without a split)."""
    split = split_of(cfg)
    if split is None:
        return sessions
    have = {s["session_id"] for s in sessions}
    missing = sorted(set(split.train) - have)
    if missing:
        raise ConfigError(KEY, f"train ids not in data.sessions: {', '.join(missing)}")
    keep = set(split.train)
    return [s for s in sessions if s["session_id"] in keep]


def eval_defaults(cfg: Any, spec: Any) -> dict[str, Any]:
    """``sessions=`` for the callback: the split's eval ids when the callback names none."""
    split = split_of(cfg)
    named = isinstance(spec, dict) and spec.get("sessions") is not None
    return {"sessions": list(split.eval)} if split and not named else {}


def check_held_out(trained: Iterable[dict[str, Any]], callbacks: Sequence[Any]) -> None:
    """Refuse evaluating on training sessions (by id), unless the callback allows it."""
    from finetune.callbacks import KEY as EVAL_KEY
    from finetune.callbacks import HarnessEval

    ids = {s["session_id"] for s in trained}
    for cb in callbacks:
        if not isinstance(cb, HarnessEval) or cb.allow_overlap:
            continue
        evaluated = cb.session_ids or tuple(s.session_id for s in cb.suite.sessions)
        both = sorted(ids & set(evaluated))
        if both:
            raise ConfigError(
                f"{EVAL_KEY}.sessions",
                f"{len(both)} evaluated session(s) are also trained on ({', '.join(both[:5])}"
                f"{', ...' if len(both) > 5 else ''}): that measures memorisation; use a held-out "
                f"split ({KEY}, e.g. finetune/splits/jest-bugfix.yaml) or set "
                f"{EVAL_KEY}.allow_overlap: true",
            )
