"""Training configuration: YAML + ``--set key=value`` overrides, validated keys, typed access.

Every read goes through :meth:`Config.get`, which names the dotted key in the ConfigError, so a
bad config fails before any model is built with a message like
``train.max_duration: expected str, got int``. Unknown keys are errors too: a typo must not be
silently ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from finetune.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Known keys per section; None = free-form mapping (passed through to a constructor).
SCHEMA: dict[str, set[str] | None] = {
    "run_name": set(),
    "seed": set(),
    "model": {"tiny", "pretrained", "lora", "load_in_4bit", "dtype"},
    "tokenizer": {"path", "train_vocab_size"},
    "data": {
        "sessions",
        "format",
        "mds_dir",
        "max_seq_len",
        "max_result_chars",
        "pairs",
        "split",
        "rollouts",
        "reward_rollouts",
        "reward_range",
        "shuffle",
        "num_workers",
    },
    "loss": None,
    "trainer": None,
    "heads": {"intent_lr", "tool_lr", "reward_lr", "cursor_lr"},
    "optimizer": {"name", "lr", "betas", "eps", "weight_decay"},
    "scheduler": {"name", "t_warmup", "alpha_f"},
    "train": {
        "max_duration",
        "batch_size",
        "microbatch_size",
        "precision",
        "device",
        "save_folder",
        "save_interval",
        "save_num_checkpoints_to_keep",
        "autoresume",
        "fsdp",
        "log_file",
        "console_log_interval",
        "progress_bar",
        "eval_interval",
        "dist_timeout",
    },
    "algorithms": {
        "loss_weight_schedule",
        "tool_failure_mask",
        "seq_length_warmup",
        "gradient_clipping",
        "reference",
    },
    "callbacks": {"harness_eval"},
    "export": {"folder", "heads"},
    "reward": None,
}
_SCALARS = {"run_name", "seed"}
_MISSING = object()


@dataclass(frozen=True)
class Config:
    raw: Mapping[str, Any]
    path: Path | None = None

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        """The value at dotted ``key`` checked against ``kind``; ``default`` when absent."""
        node: Any = self.raw
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node or node[part] is None:
                if default is _MISSING:
                    raise ConfigError(key, "required key is missing")
                return default
            node = node[part]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(node, int) and not isinstance(node, bool):
            node = float(node)  # YAML writes 1e-4 as a str and 1 as an int; accept ints for floats
        if float in kinds and isinstance(node, str):
            try:
                node = float(node)
            except ValueError:
                pass
        if not isinstance(node, kinds) or (isinstance(node, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise ConfigError(key, f"expected {names}, got {type(node).__name__} {node!r}")
        return node

    def section(self, key: str) -> dict[str, Any]:
        return dict(self.get(key, dict, {}))

    def path_of(self, key: str, default: Any = _MISSING, must_exist: bool = True) -> Path:
        """A path value; relative paths are tried against the working directory, then the project.

        ``etai train`` may run from anywhere, while bundled configs name project files.
        """
        return self.path_of_value(self.get(key, str, default), key, must_exist)

    def paths_of(self, key: str) -> list[Path]:
        """``path_of`` for a key holding one path or a list of them (e.g. ``data.sessions``)."""
        value = self.get(key, (str, list))
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) for v in values):
            raise ConfigError(key, f"expected a path or a non-empty list of paths, got {value!r}")
        return [
            self.path_of_value(v, f"{key}[{i}]" if isinstance(value, list) else key)
            for i, v in enumerate(values)
        ]

    def path_of_value(self, value: str, key: str, must_exist: bool = True) -> Path:
        """``path_of`` for a value read otherwise (an item of a list); ``key`` names it in errors."""
        path = Path(value).expanduser()
        if path.is_absolute() or not must_exist:
            candidates = [path]
        else:
            candidates = [Path.cwd() / path, PROJECT_ROOT / path]
        for candidate in candidates:
            if candidate.exists() or not must_exist:
                return candidate
        raise ConfigError(
            key, f"file not found: {value} (looked in {Path.cwd()} and {PROJECT_ROOT})"
        )


def _parse_override(item: str) -> tuple[list[str], Any]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(item, "override must look like key.path=value")
    try:
        parsed = yaml.safe_load(value) if value else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip().split("."), parsed


def apply_overrides(raw: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    for item in overrides:
        parts, value = _parse_override(item)
        node = raw
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
    return raw


def validate(raw: Mapping[str, Any]) -> None:
    for section, value in raw.items():
        if section not in SCHEMA:
            raise ConfigError(section, f"unknown section; known: {', '.join(SCHEMA)}")
        keys = SCHEMA[section]
        if section in _SCALARS or keys is None or value is None:
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(section, f"expected a mapping, got {type(value).__name__}")
        for key in value:
            if key not in keys:
                raise ConfigError(
                    f"{section}.{key}", f"unknown key; known: {', '.join(sorted(keys))}"
                )


def load_config(path: str | Path, overrides: Iterable[str] = ()) -> Config:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError("config", f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError("config", f"{path} must hold a mapping at top level")
    raw = apply_overrides(raw, overrides)
    validate(raw)
    return Config(raw=raw, path=path)


def add_config_arguments(p: Any) -> None:
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
