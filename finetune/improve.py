"""``etai improve CONFIG``: learning from execution, iteration by iteration.

Iteration 0 fine-tunes on the training split's reference traces (the ``sft`` config). Each later
iteration collects rollouts of the previous model on the training split in sandboxes (``etai
run`` with N samples at temperature > 0), trains on them (``trainer: rft``, starting from the
previous model; see finetune.rollouts), and every iteration's export is evaluated greedily on
the training split and the held-out split. Layout under ``out``::

    sft-sessions.jsonl          the training split's reference traces
    iter-0/hf                   the exported model (etai run --agent hf:...)
    iter-0/eval                 run folder of the evaluation (both splits)
    iter-0/metrics.json         PA@1..k, pass, invalid-action rate per split
    iter-1/collect              run folder of the rollouts: the RFT data set
    iter-1/hf, iter-1/eval, iter-1/metrics.json
    iterations.jsonl            one line per finished iteration (metrics vs iteration)

Resumable: an iteration with metrics.json is done; an export that exists is not retrained; the
run folders resume as ``etai run`` does (rows already stored are skipped).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finetune.config import PROJECT_ROOT
from finetune.errors import ConfigError
from finetune.rollouts import select_green

KEYS = {
    "suite",
    "out",
    "train_sessions",
    "heldout_sessions",
    "iterations",
    "sft",
    "rft",
    "collect",
    "evaluate",
    "k",
    "max_steps",
    "workers",
    "sandbox",
}


@dataclass(frozen=True)
class ImproveConfig:
    suite: str
    out: Path
    train_sessions: tuple[str, ...]
    heldout_sessions: tuple[str, ...]
    sft_config: Path
    iterations: int = 1
    sft_set: tuple[str, ...] = ()
    rft_set: tuple[str, ...] = ()
    collect: Mapping[str, Any] = field(default_factory=dict)  # samples, temperature, top_p, ...
    evaluate: Mapping[str, Any] = field(default_factory=dict)  # generation options
    k: int = 3
    max_steps: int | None = None
    workers: int = 2
    sandbox: str = "docker"


def _resolve(value: str, key: str) -> Path:
    path = Path(value).expanduser()
    if path.is_absolute() or path.exists():
        return path
    if (PROJECT_ROOT / path).exists():
        return PROJECT_ROOT / path
    raise ConfigError(key, f"file not found: {value}")


_REQUIRED = object()


def _typed(
    raw: Mapping[str, Any], key: str, kind: type, default: Any = _REQUIRED, where: str = ""
) -> Any:
    value = raw.get(key)
    if value is None:
        if default is _REQUIRED:
            raise ConfigError(where + key, "required key is missing")
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ConfigError(
            where + key, f"expected {kind.__name__}, got {type(value).__name__} {value!r}"
        )
    return value


def _ids(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = _typed(raw, key, list)
    if not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(key, "expected a non-empty list of session ids")
    return tuple(value)


def load_improve_config(path: str | Path, overrides: Sequence[str] = ()) -> ImproveConfig:
    """The YAML at ``path`` with ``--set key=value`` overrides; unknown keys are errors."""
    import yaml

    from finetune.config import apply_overrides

    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("config", f"cannot read {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError("config", f"{path} must hold a mapping at top level")
    raw = apply_overrides(raw, overrides)
    for key in raw:
        if key not in KEYS:
            raise ConfigError(key, f"unknown key; known: {', '.join(sorted(KEYS))}")
    sft = _typed(raw, "sft", dict)
    rft = _typed(raw, "rft", dict, {})
    train, heldout = _ids(raw, "train_sessions"), _ids(raw, "heldout_sessions")
    if set(train) & set(heldout):
        raise ConfigError(
            "heldout_sessions", f"also in train_sessions: {set(train) & set(heldout)}"
        )
    iterations = _typed(raw, "iterations", int, 1)
    if iterations < 0:
        raise ConfigError("iterations", "must be >= 0 (RFT iterations after the SFT one)")
    collect = dict(_typed(raw, "collect", dict, {}))
    if float(collect.get("temperature", 1.0)) <= 0:
        raise ConfigError("collect.temperature", "rejection sampling needs temperature > 0")
    return ImproveConfig(
        suite=_typed(raw, "suite", str),
        out=Path(_typed(raw, "out", str)),
        train_sessions=train,
        heldout_sessions=heldout,
        sft_config=_resolve(_typed(sft, "config", str, where="sft."), "sft.config"),
        iterations=iterations,
        sft_set=tuple(map(str, _typed(sft, "set", list, [], "sft."))),
        rft_set=tuple(map(str, _typed(rft, "set", list, [], "rft."))),
        collect=collect,
        evaluate=dict(_typed(raw, "evaluate", dict, {})),
        k=_typed(raw, "k", int, 3),
        max_steps=_typed(raw, "max_steps", int, None),
        workers=_typed(raw, "workers", int, 2),
        sandbox=_typed(raw, "sandbox", str, "docker"),
    )


# --- metrics ------------------------------------------------------------------------------


def split_metrics(rows: Sequence[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """PA@1..k, green share and invalid-action rate (invalid steps / steps) of one split's rows."""
    from harness.runs.metrics import path_accuracy, valid

    rows = valid(rows)
    steps = sum(int(r.get("steps_used") or 0) for r in rows)
    invalid = sum(int(r.get("n_invalid") or 0) for r in rows)
    return {
        "n": len(rows),
        "path_accuracy": {str(j): v for j, v in path_accuracy(rows, k).items()},
        "green": sum(1 for r in rows if r.get("green")) / len(rows) if rows else None,
        "invalid_action_rate": invalid / steps if steps else None,
        "steps": steps,
    }


# --- the loop -----------------------------------------------------------------------------


def _sft_sessions(cfg: ImproveConfig) -> Path:
    from harness.suites.load import load_suite

    suite = load_suite(cfg.suite)
    by_id = {s.session_id: s.raw for s in suite.sessions}
    missing = [sid for sid in cfg.train_sessions + cfg.heldout_sessions if sid not in by_id]
    if missing:
        raise ConfigError("train_sessions", f"not in suite {cfg.suite}: {', '.join(missing)}")
    path = cfg.out / "sft-sessions.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(by_id[sid]) for sid in cfg.train_sessions]
    path.write_text("\n".join(lines) + "\n")
    return path


def _train(config: Path, overrides: Sequence[str]) -> None:
    from finetune.train import train

    train(config, overrides)


def _run(cfg: ImproveConfig, model: Path, sessions: Sequence[str], out: Path, **extra: Any) -> list:
    from harness.runs.results import read_rows
    from harness.runs.runner import run

    options = dict(extra.pop("options", {}))
    run(
        cfg.suite,
        [f"hf:{model}"],
        k=cfg.k,
        max_steps=cfg.max_steps,
        workers=cfg.workers,
        out=out,
        sandbox=cfg.sandbox,
        options=options,
        progress=False,
        session_ids=list(sessions),
        **extra,
    )
    return read_rows(out / "results.jsonl")


def _options(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in spec.items() if k in ("temperature", "top_p", "max_new_tokens", "device")
    }


def improve(
    cfg: ImproveConfig, log: Callable[[str], None] = lambda message: None
) -> list[dict[str, Any]]:
    """Run (or resume) every iteration; returns one metrics record per iteration."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    sft_sessions = _sft_sessions(cfg)
    records = []
    for i in range(cfg.iterations + 1):
        folder = cfg.out / f"iter-{i}"
        done = folder / "metrics.json"
        if done.is_file():
            records.append(json.loads(done.read_text()))
            log(f"iteration {i}: done already")
            continue
        export = folder / "hf"
        common = [
            f"run_name=improve-iter-{i}",
            f"export.folder={export}",
            f"train.log_file={folder / 'log.txt'}",
            "train.save_folder=null",
            "train.autoresume=false",
        ]
        kept = None
        if not (export / "config.json").is_file():
            if i == 0:
                log("iteration 0: SFT on the training split's reference traces")
                _train(cfg.sft_config, [*cfg.sft_set, f"data.sessions={sft_sessions}", *common])
            else:
                previous = cfg.out / f"iter-{i - 1}" / "hf"
                log(f"iteration {i}: collecting rollouts of iter-{i - 1}")
                rows = _run(
                    cfg,
                    previous,
                    cfg.train_sessions,
                    folder / "collect",
                    samples=int(cfg.collect.get("samples", 4)),
                    options={"temperature": 1.0, **_options(cfg.collect)},
                )
                kept = len(select_green(rows, per_session=len(rows) or 1))
                log(f"iteration {i}: {kept} distinct green rollouts of {len(rows)}; RFT")
                _train(
                    cfg.sft_config,
                    [
                        *cfg.sft_set,
                        "trainer.type=rft",
                        f"data.rollouts={folder / 'collect'}",
                        "model.tiny=null",
                        f"model.pretrained={previous}",
                        f"tokenizer.path={previous}",
                        *cfg.rft_set,
                        *common,
                    ],
                )
        log(f"iteration {i}: evaluating")
        rows = _run(
            cfg,
            export,
            cfg.train_sessions + cfg.heldout_sessions,
            folder / "eval",
            options=_options(cfg.evaluate),
        )
        train_ids = set(cfg.train_sessions)
        record = {
            "iteration": i,
            "model": str(export),
            "train": split_metrics([r for r in rows if r["session_id"] in train_ids], cfg.k),
            "heldout": split_metrics([r for r in rows if r["session_id"] not in train_ids], cfg.k),
            "green_rollouts": kept,
        }
        done.write_text(json.dumps(record, indent=2) + "\n")
        with (cfg.out / "iterations.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        records.append(record)
        log(_line(record, cfg.k))
    return records


def _line(record: Mapping[str, Any], k: int) -> str:
    def fmt(split: Mapping[str, Any]) -> str:
        pa = split["path_accuracy"].get(str(k))
        rate = split["invalid_action_rate"]
        return f"PA@{k} {'-' if pa is None else f'{pa:.3f}'}, invalid {'-' if rate is None else f'{rate:.3f}'}"

    return (
        f"iteration {record['iteration']}: train {fmt(record['train'])}; "
        f"held-out {fmt(record['heldout'])}"
    )
